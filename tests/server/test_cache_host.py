"""--cache-host: the prefix cache's host tier under `pagellm serve`.

A prompt repeated after another prompt evicted its blocks from a small pool
is restored from the host tier: the tokens of a server without any prefix
cache, usage's cached_tokens and /metrics count the restored blocks, and
/v1/plan charges the tier to the host. A bad size is refused before the
server starts."""
import random
import subprocess

import requests

from conftest import STORIES, complete_cached as complete

BLOCK = 16


def prompt(seed):
    rng = random.Random(seed)
    return [rng.randrange(3, 512) for _ in range(300)]


def test_repeat_after_eviction_comes_from_the_host_tier(start_server):
    p, other = prompt(1), prompt(2)
    full = (len(p) - 1) // BLOCK * BLOCK
    cold = start_server("--no-prefix-cache", "-c", "320", "--max-num-seqs", "1")
    want, _ = complete(cold, p)
    cold.stop()

    s = start_server("-c", "320", "--max-num-seqs", "1", "--cache-host", "16MiB")
    assert complete(s, p) == (want, 0)
    complete(s, other)  # 308 + 308 tokens in a 320-token pool: p's blocks are evicted
    m = s.metrics()
    assert m["pagellm_host_tier_stored_total"] >= full // BLOCK
    assert 0 <= m["pagellm_host_tier_stored_ahead_total"] <= m["pagellm_host_tier_stored_total"]
    assert complete(s, p) == (want, full)
    m2 = s.metrics()
    assert m2["pagellm_host_tier_hits_total"] - m["pagellm_host_tier_hits_total"] == full // BLOCK
    assert m2["pagellm_host_tier_restored_bytes_total"] > 0
    assert 0 < m2["pagellm_host_tier_bytes"] <= m2["pagellm_host_tier_capacity_bytes"] <= 16 << 20
    plan = requests.get(s.url + "/v1/plan", timeout=10).json()
    assert plan["host_tier_bytes"] == 16 << 20
    host = plan["devices"][-1]
    assert host["host_tier_bytes"] == 16 << 20
    used = sum(host[k] for k in ("weight_bytes", "kv_bytes", "state_bytes", "workspace_bytes",
                                 "host_tier_bytes"))
    assert host["free_after_bytes"] == max(host["free_bytes"] - used, 0)


def test_bad_cache_host_is_refused(pagellm_bin):
    for bad in ("lots", "-5MiB"):
        r = subprocess.run([pagellm_bin, "serve", "-m", str(STORIES), "--port", "0",
                            "--cache-host", bad], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (bad, r.stdout, r.stderr)
        assert r.stderr.startswith("error: ") and "size" in r.stderr, r.stderr
