"""Reasoning replies: a reasoning template's <think>...</think> block comes back
apart from the answer (Chat reasoning_content, a Responses reasoning item, an
Anthropic thinking block), streamed and not; reasoning_format none leaves it
in the content; chat_template_kwargs reach the template; past thoughts go
back to the template; a thought before a tool call. The replies are forced
with a raw GBNF grammar (the whole reply) on the shipped model, so the text
is known; the Qwen3 template is the model's chat template (--chat-template)."""
import json
import subprocess

import jinja2
import pytest
import requests

from conftest import DATA, STORIES

QWEN3 = DATA / "chat-templates" / "Qwen-Qwen3-0.6B.jinja"
R1 = DATA / "chat-templates" / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
ASK = [{"role": "user", "content": "What is 2+2?"}]
THOUGHT, ANSWER = "Two and two.\nThat makes four.", "It is 4."
REPLY = f"<think>\n{THOUGHT}\n</think>\n\n{ANSWER}"


def gbnf(text):
    return "root ::= " + json.dumps(text)


def chat(server, body, stream=False):
    url = server.url + "/v1/chat/completions"
    if not stream:
        r = requests.post(url, json=body, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]
    r = requests.post(url, json={**body, "stream": True}, stream=True, timeout=120)
    assert r.status_code == 200, r.text
    msg = {"content": "", "reasoning_content": "", "order": []}
    for line in r.iter_lines():
        if not line.startswith(b"data: {"):
            continue
        delta = json.loads(line[6:])["choices"][0]["delta"]
        for key in ("reasoning_content", "content"):
            if delta.get(key):
                msg[key] += delta[key]
                if not msg["order"] or msg["order"][-1] != key:
                    msg["order"].append(key)
    return msg


@pytest.fixture(scope="module")
def long_ctx_model(pagellm_bin, tmp_path_factory):
    """A tiny random model with the shipped vocabulary and a 4,096-token context
    (the Qwen3 template's tool instructions alone are ~500 of its tokens)."""
    path = tmp_path_factory.mktemp("models") / "ctx4k.gguf"
    subprocess.run([pagellm_bin, "make-model", "--n-embd", "64", "--n-layer", "2", "--n-head", "4",
                    "--n-head-kv", "4", "--n-ff", "128", "--n-ctx", "4096", "--type", "f32",
                    "--vocab-from", str(STORIES), "--seed", "5", "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    return path


@pytest.fixture(scope="module")
def qwen3(pagellm_bin, long_ctx_model):
    from conftest import Server
    s = Server(pagellm_bin, ["-m", str(long_ctx_model), "--chat-template", str(QWEN3), "-c", "8192"])
    yield s
    s.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_the_thought_is_split_from_the_answer(qwen3, stream):
    msg = chat(qwen3, {"messages": ASK, "grammar": gbnf(REPLY), "max_tokens": 200}, stream)
    assert msg["reasoning_content"] == THOUGHT
    assert msg["content"] == ANSWER
    if stream:
        assert msg["order"] == ["reasoning_content", "content"]


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_format_none_and_legacy(qwen3, stream):
    none = chat(qwen3, {"messages": ASK, "grammar": gbnf(REPLY), "max_tokens": 200,
                        "reasoning_format": "none"}, stream)
    assert none["content"] == REPLY and not none.get("reasoning_content")
    legacy = chat(qwen3, {"messages": ASK, "grammar": gbnf(REPLY), "max_tokens": 200,
                          "reasoning_format": "deepseek-legacy"}, stream)
    assert legacy["content"] == REPLY and legacy["reasoning_content"] == THOUGHT


def test_server_reasoning_format_none(start_server):
    srv = start_server("--chat-template", str(QWEN3), "--reasoning-format", "none")
    msg = chat(srv, {"messages": ASK, "grammar": gbnf(REPLY), "max_tokens": 200})
    assert msg["content"] == REPLY and "reasoning_content" not in msg
    # A request's format wins over the server's.
    msg = chat(srv, {"messages": ASK, "grammar": gbnf(REPLY), "max_tokens": 200,
                     "reasoning_format": "auto"})
    assert msg["reasoning_content"] == THOUGHT and msg["content"] == ANSWER


def test_a_reply_without_a_thought_is_all_content(qwen3):
    msg = chat(qwen3, {"messages": ASK, "grammar": gbnf("Just 4."), "max_tokens": 50})
    assert msg["content"] == "Just 4." and "reasoning_content" not in msg


def test_a_template_that_opens_the_thought(start_server):
    # DeepSeek-R1's template ends the prompt with "<think>\n": the reply starts inside the thought.
    srv = start_server("--chat-template", str(R1))
    for stream in (False, True):
        msg = chat(srv, {"messages": ASK, "grammar": gbnf(f"{THOUGHT}\n</think>\n\n{ANSWER}"),
                         "max_tokens": 200}, stream)
        assert msg["reasoning_content"] == THOUGHT and msg["content"] == ANSWER


def prompt_tokens(server, body):
    r = requests.post(server.url + "/v1/chat/completions", json={**body, "max_tokens": 1}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens"]


def count_tokens(pagellm_bin, text):
    out = subprocess.run([pagellm_bin, "tokenize", "-m", str(STORIES), "--text", text,
                          "--parse-special", "--json"], capture_output=True, text=True, check=True)
    return len(json.loads(out.stdout)["ids"])


def render_qwen3(messages, **kwargs):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(QWEN3.read_text()).render(messages=messages, add_generation_prompt=True,
                                                     bos_token="<s>", eos_token="</s>", **kwargs)


def test_chat_template_kwargs_reach_the_template(qwen3, pagellm_bin):
    on = render_qwen3(ASK)
    off = render_qwen3(ASK, enable_thinking=False)
    assert off.endswith("<think>\n\n</think>\n\n") and on != off
    # The server's prompt is the template's text, tokenized (with BOS).
    assert prompt_tokens(qwen3, {"messages": ASK}) == count_tokens(pagellm_bin, on)
    assert prompt_tokens(qwen3, {"messages": ASK, "chat_template_kwargs": {"enable_thinking": False}}) \
        == count_tokens(pagellm_bin, off)


def test_server_chat_template_kwargs_are_defaults(start_server, pagellm_bin):
    srv = start_server("--chat-template", str(QWEN3), "--chat-template-kwargs",
                       '{"enable_thinking": false}')
    off = count_tokens(pagellm_bin, render_qwen3(ASK, enable_thinking=False))
    on = count_tokens(pagellm_bin, render_qwen3(ASK))
    assert prompt_tokens(srv, {"messages": ASK}) == off
    assert prompt_tokens(srv, {"messages": ASK, "chat_template_kwargs": {"enable_thinking": True}}) == on


def test_past_reasoning_follows_the_template(qwen3, pagellm_bin):
    # Qwen3 shows the thought of the assistant turn after the last user query only.
    turns = [{"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."}]
    assert "Greet back." in render_qwen3(turns)
    assert prompt_tokens(qwen3, {"messages": turns}) == count_tokens(pagellm_bin, render_qwen3(turns))
    later = turns + [{"role": "user", "content": "And now?"}]
    assert "Greet back." not in render_qwen3(later)
    assert prompt_tokens(qwen3, {"messages": later}) == count_tokens(pagellm_bin, render_qwen3(later))


TOOL = {"type": "function", "function": {
    "name": "add", "description": "Adds two numbers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}


def thought_and_calls(url, body, stream):
    """A tool-calling reply's thought, its calls as (name, arguments) and its finish reason."""
    if not stream:
        r = requests.post(url, json=body, timeout=120)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in choice["message"].get("tool_calls") or []]
        return choice["message"].get("reasoning_content"), calls, choice["finish_reason"]
    r = requests.post(url, json={**body, "stream": True}, stream=True, timeout=120)
    assert r.status_code == 200, r.text
    thought, parts, finish = "", {}, None
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            ch = json.loads(line[6:])["choices"][0]
            thought += ch["delta"].get("reasoning_content") or ""
            for tc in ch["delta"].get("tool_calls", []):
                name, args = parts.get(tc["index"], ("", ""))
                parts[tc["index"]] = (name + (tc["function"].get("name") or ""),
                                      args + (tc["function"].get("arguments") or ""))
            finish = ch["finish_reason"] or finish
    return thought, [(n, json.loads(a)) for _, (n, a) in sorted(parts.items())], finish


@pytest.mark.parametrize("stream", [False, True])
def test_think_then_call(qwen3, stream):
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 2}}\n</tool_call>'
    body = {"messages": ASK, "tools": [TOOL], "grammar": gbnf(f"<think>\nI should add.\n</think>\n\n{call}"),
            "max_tokens": 200}
    thought, calls, finish = thought_and_calls(qwen3.url + "/v1/chat/completions", body, stream)
    assert thought == "I should add." and finish == "tool_calls"
    assert calls == [("add", {"a": 2, "b": 2})]


def sse_events(r):
    events = []
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            events.append(json.loads(line[6:]))
    return events


def test_responses_reasoning_item(qwen3):
    body = {"input": "What is 2+2?", "grammar": gbnf(REPLY), "max_output_tokens": 200}
    r = requests.post(qwen3.url + "/v1/responses", json=body, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert [o["type"] for o in out] == ["reasoning", "message"]
    assert out[0]["content"] == [{"type": "reasoning_text", "text": THOUGHT}]
    assert out[1]["content"][0]["text"] == ANSWER

    r = requests.post(qwen3.url + "/v1/responses", json={**body, "stream": True}, stream=True, timeout=120)
    events = sse_events(r)
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.reasoning_text.delta")
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == THOUGHT and text == ANSWER
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["type"]) for e in added] == [(0, "reasoning"), (1, "message")]
    done = [e for e in events if e["type"] == "response.reasoning_text.done"]
    assert done[0]["text"] == THOUGHT
    final = [e for e in events if e["type"] == "response.completed"][0]["response"]
    assert [o["type"] for o in final["output"]] == ["reasoning", "message"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))

    # The stored reply carries its thought into the template's next turn.
    first = requests.post(qwen3.url + "/v1/responses", json=body, timeout=120).json()
    nxt = requests.post(qwen3.url + "/v1/responses",
                        json={"input": "And now?", "previous_response_id": first["id"],
                              "max_output_tokens": 1}, timeout=60)
    turns = [{"role": "user", "content": "What is 2+2?"},
             {"role": "assistant", "content": ANSWER, "reasoning_content": THOUGHT},
             {"role": "user", "content": "And now?"}]
    assert nxt.json()["usage"]["input_tokens"] == prompt_tokens(qwen3, {"messages": turns})


def test_responses_reasoning_input_items(qwen3):
    body = {"input": [{"role": "user", "content": "Hi"},
                      {"type": "reasoning", "id": "rs_1", "summary": [],
                       "content": [{"type": "reasoning_text", "text": "Greet back."}]},
                      {"role": "assistant", "content": "Hello"}],
            "max_output_tokens": 1}
    r = requests.post(qwen3.url + "/v1/responses", json=body, timeout=60)
    assert r.status_code == 200, r.text
    turns = [{"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."}]
    assert r.json()["usage"]["input_tokens"] == prompt_tokens(qwen3, {"messages": turns})
    bad = requests.post(qwen3.url + "/v1/responses",
                        json={"input": [{"type": "reasoning", "content": "x"}]}, timeout=30)
    assert bad.status_code == 400 and "content" in bad.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_thinking_block(qwen3, stream):
    import anthropic
    client = anthropic.Anthropic(base_url=qwen3.url, api_key="unused", max_retries=0)
    kw = dict(model="any", max_tokens=200, messages=ASK, extra_body={"grammar": gbnf(REPLY)})
    if stream:
        with client.messages.stream(**kw) as s:
            thought = "".join(e.delta.thinking for e in s
                              if e.type == "content_block_delta" and e.delta.type == "thinking_delta")
            msg = s.get_final_message()
        assert thought == THOUGHT
    else:
        msg = client.messages.create(**kw)
    assert [b.type for b in msg.content] == ["thinking", "text"]
    assert msg.content[0].thinking == THOUGHT and msg.content[1].text == ANSWER
    assert msg.stop_reason == "end_turn"


def test_anthropic_thinking_switch_and_past_thoughts(qwen3, pagellm_bin):
    url = qwen3.url + "/v1/messages/count_tokens"
    off = requests.post(url, json={"messages": ASK, "thinking": {"type": "disabled"}}, timeout=30)
    assert off.json()["input_tokens"] == count_tokens(pagellm_bin, render_qwen3(ASK, enable_thinking=False))
    on = requests.post(url, json={"messages": ASK, "thinking": {"type": "enabled", "budget_tokens": 1024}},
                       timeout=30)
    assert on.json()["input_tokens"] == count_tokens(pagellm_bin, render_qwen3(ASK, enable_thinking=True))
    turns = [{"role": "user", "content": "Hi"},
             {"role": "assistant", "content": [{"type": "thinking", "thinking": "Greet back.", "signature": ""},
                                               {"type": "text", "text": "Hello"}]}]
    r = requests.post(url, json={"messages": turns}, timeout=30)
    want = [{"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."}]
    assert r.json()["input_tokens"] == count_tokens(pagellm_bin, render_qwen3(want))


def test_bad_reasoning_fields_are_400(qwen3):
    url = qwen3.url + "/v1/chat/completions"
    for body, param in [
        ({"reasoning_format": "fancy"}, "reasoning_format"),
        ({"reasoning_format": 3}, "reasoning_format"),
        ({"chat_template_kwargs": [1]}, "chat_template_kwargs"),
        ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs"),
        ({"messages": [{"role": "user", "content": "x", "reasoning_content": "y"}]},
         "messages[0].reasoning_content"),
        ({"messages": [{"role": "user", "content": "x"},
                       {"role": "assistant", "content": "y", "reasoning_content": 5},
                       {"role": "user", "content": "z"}]}, "messages[1].reasoning_content"),
    ]:
        r = requests.post(url, json={"messages": ASK, "max_tokens": 1, **body}, timeout=30)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["param"] == param, r.text


def test_server_flag_errors(pagellm_bin):
    for args, text in [(["--reasoning-format", "fancy"], "--reasoning-format"),
                       (["--chat-template-kwargs", "[1]"], "--chat-template-kwargs"),
                       (["--chat-template-kwargs", "{"], "--chat-template-kwargs")]:
        out = subprocess.run([pagellm_bin, "serve", "-m", str(STORIES), "--port", "0", *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and text in out.stderr, out.stderr


# --- harmony (gpt-oss) ----------------------------------------------------------------------

GPT_OSS = DATA / "chat-templates" / "openai-gpt-oss-120b.jinja"


@pytest.fixture(scope="module")
def harmony(pagellm_bin, long_ctx_model):
    from conftest import Server
    s = Server(pagellm_bin, ["-m", str(long_ctx_model), "--chat-template", str(GPT_OSS), "-c", "8192"])
    yield s
    s.stop()


def render_gpt_oss(messages, **kwargs):
    import datetime
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)

    def raise_exception(msg):
        raise jinja2.TemplateError(msg)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(GPT_OSS.read_text()).render(messages=messages, add_generation_prompt=True,
                                                       bos_token="<s>", eos_token="</s>", **kwargs)


HARMONY_REPLY = ("<|channel|>analysis<|message|>User wants 2+2.<|end|><|start|>assistant"
                 "<|channel|>final<|message|>It is 4.")


@pytest.mark.parametrize("stream", [False, True])
def test_harmony_channels_split(harmony, stream):
    msg = chat(harmony, {"messages": ASK, "grammar": gbnf(HARMONY_REPLY), "max_tokens": 200}, stream)
    assert msg["reasoning_content"] == "User wants 2+2."
    assert msg["content"] == "It is 4."
    none = chat(harmony, {"messages": ASK, "grammar": gbnf(HARMONY_REPLY), "max_tokens": 200,
                          "reasoning_format": "none"}, stream)
    assert none["content"] == HARMONY_REPLY


@pytest.mark.parametrize("stream", [False, True])
def test_harmony_tool_call(harmony, stream):
    reply = ("<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>commentary "
             'to=functions.add <|constrain|>json<|message|>{"a": 2, "b": 2}')
    body = {"messages": ASK, "tools": [TOOL], "grammar": gbnf(reply), "max_tokens": 200}
    thought, calls, finish = thought_and_calls(harmony.url + "/v1/chat/completions", body, stream)
    assert thought == "Add them." and finish == "tool_calls"
    assert calls == [("add", {"a": 2, "b": 2})]


def test_harmony_template_renders_as_jinja2_with_past_thoughts(harmony, pagellm_bin):
    turns = [{"role": "system", "content": "Be brief."},
             {"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "Hello", "thinking": "Greet back."},
             {"role": "user", "content": "2+2?"}]
    want = count_tokens(pagellm_bin, render_gpt_oss(turns))
    ours = [dict(m) for m in turns]
    ours[2] = {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."}
    assert prompt_tokens(harmony, {"messages": ours}) == want
    low = render_gpt_oss(turns[1:2], reasoning_effort="low")
    assert "Reasoning: low" in low
    assert prompt_tokens(harmony, {"messages": turns[1:2], "chat_template_kwargs": {"reasoning_effort": "low"}}) \
        == count_tokens(pagellm_bin, low)
