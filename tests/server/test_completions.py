"""Chat and text completions through the official openai client."""
import pytest

MODEL = "stories"
STORY = "Once upon a time, there was a little girl named Lily. She"


def chat_text_stream(stream):
    texts, finish, role_seen = {}, {}, set()
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        assert chunk.model == MODEL
        for c in chunk.choices:
            if c.delta.role:
                assert c.delta.role == "assistant"
                role_seen.add(c.index)
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    assert role_seen == set(texts)
    return texts, finish


def completion_text_stream(stream):
    texts, finish = {}, {}
    for chunk in stream:
        assert chunk.object == "text_completion"
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    return texts, finish


def test_chat_stream_matches_non_stream(server, client_for):
    client = client_for(server)
    kwargs = dict(model=MODEL, messages=[{"role": "system", "content": "You tell stories."},
                                         {"role": "user", "content": "Tell me about a cat."}],
                  max_tokens=40, temperature=0.9, seed=11)
    full = client.chat.completions.create(**kwargs)
    assert full.object == "chat.completion"
    assert full.id.startswith("chatcmpl-")
    assert full.model == MODEL
    assert isinstance(full.created, int)
    assert len(full.choices) == 1
    choice = full.choices[0]
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length")
    assert choice.message.content
    assert full.usage.prompt_tokens > 0
    assert 0 < full.usage.completion_tokens <= 40
    assert full.usage.total_tokens == full.usage.prompt_tokens + full.usage.completion_tokens

    texts, finish = chat_text_stream(client.chat.completions.create(stream=True, **kwargs))
    assert texts == {0: choice.message.content}
    assert finish == {0: choice.finish_reason}

    # Same seed, same text; another seed, another text.
    again = client.chat.completions.create(**kwargs)
    assert again.choices[0].message.content == choice.message.content
    other = client.chat.completions.create(**{**kwargs, "seed": 12})
    assert other.choices[0].message.content != choice.message.content


def test_completion_stream_matches_non_stream(server, client_for):
    client = client_for(server)
    kwargs = dict(model=MODEL, prompt=STORY, max_tokens=48, temperature=0.8, top_p=0.95, seed=5)
    full = client.completions.create(**kwargs)
    assert full.object == "text_completion"
    assert full.id.startswith("cmpl-")
    assert len(full.choices) == 1
    assert full.choices[0].text
    texts, finish = completion_text_stream(client.completions.create(stream=True, **kwargs))
    assert texts == {0: full.choices[0].text}
    assert finish == {0: full.choices[0].finish_reason}


def test_completion_default_max_tokens_is_16(server, client_for):
    out = client_for(server).completions.create(model=MODEL, prompt=STORY, seed=1,
                                                extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == 16
    assert out.choices[0].finish_reason == "length"


def test_prompt_forms(server, client_for):
    """A string, an array of strings, token ids, arrays of token ids."""
    client = client_for(server)
    base = dict(model=MODEL, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    by_text = client.completions.create(prompt=STORY, **base)
    several = client.completions.create(prompt=[STORY, "The dog"], **base)
    assert [c.index for c in several.choices] == [0, 1]
    assert several.choices[0].text == by_text.choices[0].text
    assert several.usage.completion_tokens == 24
    token_prompt = client.completions.create(prompt=[1, 403, 407, 261], **base)
    assert token_prompt.usage.prompt_tokens == 4
    token_prompts = client.completions.create(prompt=[[1, 403, 407, 261], [1, 403]], **base)
    assert [c.index for c in token_prompts.choices] == [0, 1]
    assert token_prompts.choices[0].text == token_prompt.choices[0].text
    assert token_prompts.usage.prompt_tokens == 6
    # n > 1 with several prompts: choice p * n + i.
    grid = client.completions.create(prompt=[STORY, "The dog"], n=2, **base)
    assert [c.index for c in grid.choices] == [0, 1, 2, 3]
    assert grid.choices[0].text == grid.choices[1].text == by_text.choices[0].text


def test_n_choices(server, client_for):
    client = client_for(server)
    kwargs = dict(model=MODEL, prompt=STORY, max_tokens=24, temperature=1.0, seed=3, n=3)
    full = client.completions.create(**kwargs)
    assert [c.index for c in full.choices] == [0, 1, 2]
    texts = [c.text for c in full.choices]
    assert len(set(texts)) > 1  # independent samples
    streamed, finish = completion_text_stream(client.completions.create(stream=True, **kwargs))
    assert streamed == dict(enumerate(texts))
    assert set(finish) == {0, 1, 2}
    # Sample 0 uses the request's seed: it is the n = 1 result.
    one = client.completions.create(**{**kwargs, "n": 1})
    assert one.choices[0].text == texts[0]

    chat = client.chat.completions.create(model=MODEL, n=2, max_tokens=16, seed=9,
                                          messages=[{"role": "user", "content": "Hello"}])
    assert [c.index for c in chat.choices] == [0, 1]
    texts, finish = chat_text_stream(client.chat.completions.create(
        model=MODEL, n=2, max_tokens=16, seed=9, stream=True,
        messages=[{"role": "user", "content": "Hello"}]))
    assert texts == {c.index: c.message.content for c in chat.choices}


def test_stop_strings(server, client_for):
    client = client_for(server)
    base = dict(model=MODEL, prompt=STORY, max_tokens=60, temperature=0,
                extra_body={"ignore_eos": True})
    ref = client.completions.create(**base).choices[0].text
    assert len(ref) > 30, ref
    stop = ref[len(ref) // 2: len(ref) // 2 + 3]
    cut = ref[:ref.find(stop)]
    for stream in (False, True):
        for stop_arg in (stop, [stop, "never appears"]):
            if stream:
                texts, finish = completion_text_stream(
                    client.completions.create(stream=True, stop=stop_arg, **base))
                text, reason = texts[0], finish[0]
            else:
                out = client.completions.create(stop=stop_arg, **base)
                text, reason = out.choices[0].text, out.choices[0].finish_reason
            assert text == cut
            assert reason == "stop"


def test_include_usage(server, client_for):
    client = client_for(server)
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=10, seed=1,
        stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == []
    usage = chunks[-1].usage
    assert usage.completion_tokens <= 10
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])
    # Without include_usage no chunk has a usage.
    chunks = list(client.completions.create(model=MODEL, prompt="Hi", max_tokens=5, stream=True))
    assert all(getattr(c, "usage", None) is None for c in chunks)
    assert all(c.choices for c in chunks)


def test_chat_logprobs(server, client_for):
    client = client_for(server)
    out = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=8, temperature=0,
        logprobs=True, top_logprobs=3, extra_body={"ignore_eos": True})
    content = out.choices[0].logprobs.content
    assert len(content) == 8
    text = ""
    for item in content:
        assert item.logprob <= 0
        assert len(item.top_logprobs) == 3
        assert item.top_logprobs[0].token == item.token  # greedy
        assert item.top_logprobs[0].logprob == pytest.approx(item.logprob)
        assert item.top_logprobs[0].logprob >= item.top_logprobs[1].logprob >= \
            item.top_logprobs[2].logprob
        assert bytes(item.bytes).decode("utf-8", "replace") == item.token
        text += item.token
    assert text == out.choices[0].message.content

    # Streamed: the same tokens and numbers, spread over the chunks.
    items = []
    for chunk in client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
            temperature=0, logprobs=True, top_logprobs=3, stream=True,
            extra_body={"ignore_eos": True}):
        for c in chunk.choices:
            if c.logprobs and c.logprobs.content:
                items += c.logprobs.content
    assert [(i.token, round(i.logprob, 5)) for i in items] == \
        [(i.token, round(i.logprob, 5)) for i in content]

    # logprobs without top_logprobs: the tokens only.
    out = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                         max_tokens=3, logprobs=True, seed=2)
    assert all(item.top_logprobs == [] for item in out.choices[0].logprobs.content)
    # Off by default.
    out = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                         max_tokens=3)
    assert out.choices[0].logprobs is None


def test_completion_logprobs(server, client_for):
    out = client_for(server).completions.create(model=MODEL, prompt=STORY, max_tokens=6,
                                                temperature=0, logprobs=2,
                                                extra_body={"ignore_eos": True})
    lp = out.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    assert "".join(lp.tokens) == out.choices[0].text
    assert lp.text_offset[0] == 0
    for tok, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) == 2
        assert max(top, key=top.get) == tok
        assert logprob == pytest.approx(top[tok])


def test_penalties_change_the_output(server, client_for):
    client = client_for(server)
    base = dict(model=MODEL, prompt=STORY, max_tokens=60, temperature=0,
                extra_body={"ignore_eos": True})
    plain = client.completions.create(**base).choices[0].text
    penalised = client.completions.create(presence_penalty=2.0, frequency_penalty=2.0,
                                          **base).choices[0].text
    assert plain != penalised
    # top_k / min_p / repetition_penalty are accepted as extensions.
    out = client.completions.create(**{**base, "extra_body": {
        "ignore_eos": True, "top_k": 1, "min_p": 0.1, "repetition_penalty": 1.3}})
    assert out.choices[0].text


def test_models(server, client_for):
    import openai
    client = client_for(server)
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert models.data[0].object == "model"
    assert models.data[0].owned_by == "pagellm"
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("gpt-4")
    assert e.value.body["code"] == "model_not_found"
