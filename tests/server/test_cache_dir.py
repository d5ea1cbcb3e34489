"""--cache-dir: the prefix cache's disk tier across a restart of `pagellm serve`,
and PAGELLM_MEMINFO, the memory probe's stand-in for /proc/meminfo.

A prompt repeated after a restart with the same directory takes its full
blocks from disk (usage.prompt_tokens_details.cached_tokens and /metrics say
so) and gives the tokens of a cold server; damaged files or another --kv-type
give the cold tokens with nothing from disk. A fake meminfo that drops below
the headroom while serving holds new requests back until it recovers."""
import pathlib
import random
import subprocess
import threading
import time

import pytest
import requests

from conftest import STORIES, complete_cached as complete

BLOCK = 16


def prompt():
    rng = random.Random(5)
    return [rng.randrange(3, 512) for _ in range(300)]


def block_files(d):
    return sorted(pathlib.Path(d).glob("*.kvb"))


def test_restart_serves_the_prompt_from_disk(start_server, tmp_path):
    p = prompt()
    full = (len(p) - 1) // BLOCK * BLOCK
    cold = start_server()
    want, _ = complete(cold, p)
    cold.stop()

    first = start_server("--cache-dir", str(tmp_path))
    text, cached = complete(first, p)
    assert (text, cached) == (want, 0)
    assert first.stop() == 0  # a clean stop finishes the queued writes
    assert len(block_files(tmp_path)) >= full // BLOCK

    second = start_server("--cache-dir", str(tmp_path))
    text, cached = complete(second, p)
    assert (text, cached) == (want, full)
    m = second.metrics()
    assert m["pagellm_disk_tier_hits_total"] == full // BLOCK
    assert m["pagellm_disk_tier_read_bytes_total"] > 0
    # The read-ahead staging (64 MiB at most, DiskTierOptions::prefetch_bytes)
    # is charged to the host, in its free after.
    plan = requests.get(second.url + "/v1/plan", timeout=10).json()
    host = plan["devices"][-1]
    assert plan["disk_staging_bytes"] == host["disk_staging_bytes"] == 64 << 20
    used = sum(host[k] for k in ("weight_bytes", "kv_bytes", "state_bytes", "workspace_bytes",
                                 "host_tier_bytes", "disk_staging_bytes"))
    assert host["free_after_bytes"] == max(host["free_bytes"] - used, 0)
    second.stop()

    # Damaged files: one warning, the cold tokens, nothing from disk.
    for f in block_files(tmp_path):
        b = bytearray(f.read_bytes())
        b[-3] ^= 0x40
        f.write_bytes(bytes(b))
    third = start_server("--cache-dir", str(tmp_path))
    text, cached = complete(third, p)
    assert (text, cached) == (want, 0)
    assert third.stop() == 0
    warnings = [l for l in third.stderr_lines if "KV disk tier: skipped" in l]
    assert len(warnings) == 1, third.output()


def test_another_kv_type_computes_everything(start_server, tmp_path):
    p = prompt()
    s = start_server("--cache-dir", str(tmp_path))
    complete(s, p)
    s.stop()
    cold = start_server("--kv-type", "f32")
    want, _ = complete(cold, p)
    cold.stop()
    other = start_server("--kv-type", "f32", "--cache-dir", str(tmp_path))
    assert complete(other, p) == (want, 0)
    assert other.metrics()["pagellm_disk_tier_hits_total"] == 0


def test_cache_disk_bounds_the_directory(start_server, tmp_path):
    s = start_server("--cache-dir", str(tmp_path), "--cache-disk", "300KiB")
    rng = random.Random(9)
    for _ in range(6):
        complete(s, [rng.randrange(3, 512) for _ in range(200)], max_tokens=2)
    s.wait_metric("pagellm_disk_tier_files_evicted_total", lambda v: v > 0)
    s.stop()
    assert sum(f.stat().st_size for f in block_files(tmp_path)) <= 300 * 1024


@pytest.mark.parametrize("args, message", [
    (["--cache-disk", "1GiB"], "--cache-dir"),
    (["--cache-dir", "DIR", "--cache-disk", "lots"], "invalid size"),
    (["--cache-dir", "FILE"], "cannot create"),
])
def test_bad_cache_flags(pagellm_bin, tmp_path, args, message):
    (tmp_path / "file").write_text("x")
    args = [a.replace("DIR", str(tmp_path / "d")).replace("FILE", str(tmp_path / "file" / "sub"))
            for a in args]
    r = subprocess.run([pagellm_bin, "serve", "-m", str(STORIES), "--port", "0", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert "error" in r.stderr


def meminfo(available_kb):
    return (f"MemTotal: 64000000 kB\nMemFree: 1000 kB\nMemAvailable: {available_kb} kB\n"
            "SwapTotal: 0 kB\nSwapFree: 0 kB\n")


def test_fake_meminfo_changes_the_plan(pagellm_bin, tmp_path):
    fake = tmp_path / "meminfo"
    env = {"PATH": "/usr/bin:/bin"}

    def plan(available_kb):
        fake.write_text(meminfo(available_kb))
        return subprocess.run([pagellm_bin, "plan", "-m", str(STORIES), "--kv-fraction", "0.5"],
                              capture_output=True, text=True, timeout=60,
                              env={**env, "PAGELLM_MEMINFO": str(fake)})

    roomy, tight = plan(1_200_000), plan(900_000)
    assert roomy.returncode == 0 and tight.returncode == 0, roomy.stderr + tight.stderr
    assert roomy.stdout != tight.stdout  # half of what is free: less free, a smaller cache
    starved = plan(100_000)  # under the headroom
    assert starved.returncode != 0
    assert "error" in starved.stderr


def test_fake_meminfo_pauses_admission(start_server, tmp_path):
    fake = tmp_path / "meminfo"
    fake.write_text(meminfo(4_000_000))
    import os
    s = start_server(env={**os.environ, "PAGELLM_MEMINFO": str(fake)})
    assert complete(s, [5, 6, 7])[0]
    fake.write_text(meminfo(100_000))  # another process took the memory
    time.sleep(0.3)  # the guard checks at most every 100 ms
    done = []
    t = threading.Thread(target=lambda: done.append(complete(s, [8, 9, 10])))
    t.start()
    s.wait_metric("pagellm_admission_paused", lambda v: v == 1)
    time.sleep(0.5)
    assert not done  # held back
    fake.write_text(meminfo(4_000_000))
    t.join(60)
    assert done
    assert s.metrics()["pagellm_admission_paused"] == 0
