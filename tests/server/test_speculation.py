"""Speculative decoding through the server: the same replies with prompt
lookup and with a draft model as without, streamed and concurrent, and the
drafted/accepted counters on /metrics."""
import threading

from conftest import DATA, STORIES

# Prompts that repeat themselves: prompt lookup has drafts to propose.
PROMPTS = [
    "Once upon a time, there was a little girl named Lily. Once upon a time, there was a",
    "Tom had a red ball. He liked the red ball. Tom had a red",
    "The cat sat on the mat. The dog sat on the mat. The cat sat on the",
    "Sam and Sue went to the park. Sam and Sue went to the",
]


def complete_all(client, temperature):
    out = []
    for i, p in enumerate(PROMPTS):
        r = client.completions.create(model="m", prompt=p, max_tokens=48, temperature=temperature,
                                      seed=7 + i)
        out.append(r.choices[0].text)
    return out


def concurrent(client_for, server, temperature):
    results = [None] * len(PROMPTS)

    def run(i):
        text = ""
        for chunk in client_for(server).completions.create(
                model="m", prompt=PROMPTS[i], max_tokens=48, temperature=temperature,
                seed=7 + i, stream=True):
            text += "".join(c.text for c in chunk.choices)
        results[i] = text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_prompt_lookup_and_draft_model_give_the_same_replies(start_server, client_for):
    plain = start_server()
    want_greedy = complete_all(client_for(plain), 0)
    want_sampled = complete_all(client_for(plain), 0.8)
    plain.stop()
    for args in (["--spec-ngram", "3"], ["--draft-model", str(STORIES), "--draft-max", "3"]):
        s = start_server(*args)
        client = client_for(s)
        assert complete_all(client, 0) == want_greedy, args
        assert complete_all(client, 0.8) == want_sampled, args
        assert concurrent(client_for, s, 0) == want_greedy, args
        m = s.metrics()
        assert m["pagellm_spec_proposed_total"] > 0, args
        assert 0 < m["pagellm_spec_accepted_total"] <= m["pagellm_spec_proposed_total"], args
        s.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)  # freed just after the last event
        s.stop()


def test_a_draft_model_of_another_vocabulary_is_refused(start_server):
    s = start_server("--draft-model", str(DATA / "golden/random/rand-llama-spm32k-Q4_0.gguf"),
                     wait_ready=False)
    code = s.proc.wait(60)
    assert code != 0
    assert "vocabulary" in s.output(), s.output()
