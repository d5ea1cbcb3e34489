"""Prefix caching on a hybrid model through `pagellm serve` (qwen35 from
make-model: gated delta-net layers, whose state is restored from checkpoints):
16 concurrent requests sharing a 1,000-token system prompt compute it once
(>= 90% of its blocks are prefix-cache hits in /metrics), and every reply,
greedy or sampled with a seed, equals the same request on a server without a
prefix cache, logprobs included."""
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import STORIES

SHARED = 1000
BLOCK = 16


@pytest.fixture(scope="module")
def qwen35_model(pagellm_bin, tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "qwen35.gguf"
    subprocess.run([pagellm_bin, "make-model", "--arch", "qwen35", "--n-embd", "128", "--n-layer", "4",
                    "--n-head", "4", "--n-head-kv", "2", "--n-ff", "256", "--type", "q8_0",
                    "--vocab-from", str(STORIES), "--seed", "5", "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    return path


def prompts():
    rng = random.Random(11)
    system = [rng.randrange(3, 512) for _ in range(SHARED)]
    return [system + [rng.randrange(3, 512) for _ in range(5 + i)] for i in range(16)]


def body(i, prompt):
    b = {"model": "m", "prompt": prompt, "max_tokens": 8, "logprobs": 1}
    if i % 2:
        b.update(temperature=0.9, seed=100 + i)
    else:
        b.update(temperature=0)
    return b


def reply(server, b):
    import requests
    r = requests.post(server.url + "/v1/completions", json=b, timeout=120)
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    return c["text"], c["logprobs"]["tokens"], c["logprobs"]["token_logprobs"]


def test_shared_system_prompt_is_computed_once(qwen35_model, start_server):
    ps = prompts()
    cached = start_server("--max-num-seqs", "16", model=qwen35_model)
    before = cached.metrics()
    with ThreadPoolExecutor(16) as ex:
        got = list(ex.map(lambda i: reply(cached, body(i, ps[i])), range(16)))
    after = cached.metrics()
    hits = after["pagellm_prefix_cache_hits_total"] - before["pagellm_prefix_cache_hits_total"]
    queries = after["pagellm_prefix_cache_queries_total"] - before["pagellm_prefix_cache_queries_total"]
    # 15 of the 16 requests reuse the shared prompt's full blocks.
    shared_blocks = SHARED // BLOCK
    assert hits >= 0.9 * 15 * shared_blocks, (hits, queries)
    assert hits / queries >= 0.9, (hits, queries)

    alone = start_server("--no-prefix-cache", "--max-num-seqs", "1", model=qwen35_model)
    for i, p in enumerate(ps):
        assert got[i] == reply(alone, body(i, p)), f"request {i}"
    assert alone.metrics()["pagellm_prefix_cache_hits_total"] == 0
