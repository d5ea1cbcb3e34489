"""Health, metrics, models, plan, API keys, access log, start-up and shutdown."""
import json
import re
import signal
import subprocess
import threading
import time

import requests

from conftest import STORIES

MSGS = [{"role": "user", "content": "Hi"}]


def test_health(server):
    r = requests.get(server.url + "/health", timeout=10)
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_health_is_503_while_loading(start_server):
    srv = start_server("--debug-load-delay-ms", "3000", wait_ready=False)
    r = requests.get(srv.url + "/health", timeout=10)
    assert r.status_code == 503
    assert r.json() == {"status": "loading"}
    r = requests.post(srv.url + "/v1/chat/completions", json={"messages": MSGS}, timeout=10)
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1"
    assert r.json()["error"]["code"] == "loading"
    assert requests.get(srv.url + "/metrics", timeout=10).status_code == 200
    srv.wait_ready()
    assert requests.post(srv.url + "/v1/chat/completions", json={"messages": MSGS, "max_tokens": 2},
                         timeout=30).status_code == 200


def parse_prometheus(text):
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
    return types, samples


def test_metrics(server, client_for):
    client_for(server).completions.create(model="stories", prompt="Once", max_tokens=8, seed=1)
    r = requests.get(server.url + "/metrics", timeout=10)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain")
    types, s = parse_prometheus(r.text)
    gauges = ["pagellm_requests_running", "pagellm_requests_waiting", "pagellm_kv_cache_usage_ratio",
              "pagellm_kv_blocks_used", "pagellm_kv_blocks_total", "pagellm_admission_paused",
              "pagellm_requests_in_flight"]
    counters = ["pagellm_prefix_cache_hits_total", "pagellm_prefix_cache_queries_total",
                "pagellm_preemptions_total", "pagellm_prompt_tokens_total",
                "pagellm_generation_tokens_total"]
    histograms = ["pagellm_time_to_first_token_seconds", "pagellm_inter_token_latency_seconds",
                  "pagellm_e2e_request_latency_seconds"]
    for name in gauges:
        assert types[name] == "gauge" and name in s, name
    for name in counters:
        assert types[name] == "counter" and name in s, name
    for name in histograms:
        assert types[name] == "histogram"
        buckets = [(k, v) for k, v in s.items() if k.startswith(name + "_bucket")]
        assert buckets[-1][0] == name + '_bucket{le="+Inf"}'
        values = [v for _, v in buckets]
        assert values == sorted(values)  # cumulative
        assert values[-1] == s[name + "_count"] > 0
        assert s[name + "_sum"] > 0
    assert s["pagellm_kv_blocks_total"] > 0
    assert 0 <= s["pagellm_kv_cache_usage_ratio"] <= 1
    assert s["pagellm_generation_tokens_total"] >= 8
    assert s["pagellm_prompt_tokens_total"] > 0
    assert s["pagellm_admission_paused"] == 0
    assert s['pagellm_http_requests_total{route="/v1/completions",status="200"}'] >= 1


def test_prefix_cache_counters_move(server, client_for):
    before = server.metrics()
    prompt = "Once upon a time, there was a big dog. The dog liked to run and play in the park."
    for _ in range(2):
        client_for(server).completions.create(model="stories", prompt=prompt, max_tokens=2)
    after = server.metrics()
    assert after["pagellm_prefix_cache_queries_total"] > before["pagellm_prefix_cache_queries_total"]
    assert after["pagellm_prefix_cache_hits_total"] > before["pagellm_prefix_cache_hits_total"]


def test_models_and_plan(server, pagellm_bin):
    r = requests.get(server.url + "/v1/models", timeout=10).json()
    assert r["object"] == "list"
    (m,) = r["data"]
    assert m["id"] == "stories" and m["object"] == "model" and isinstance(m["created"], int)
    assert m["max_model_len"] == 512
    version = subprocess.run([pagellm_bin, "--version"], check=True, capture_output=True,
                             text=True, timeout=60).stdout.strip()
    assert m["pagellm_version"] == version
    assert f'pagellm_build_info{{version="{version}"}} 1' in \
        requests.get(server.url + "/metrics", timeout=10).text
    plan = requests.get(server.url + "/v1/plan", timeout=10).json()
    assert plan["num_blocks"] > 0 and plan["block_size"] == 16
    assert plan["kv_tokens"] == plan["num_blocks"] * plan["block_size"]
    assert plan["max_seq_len"] == 512 and plan["kv_type"] == "f16"
    assert plan["devices"][-1]["name"] == "host"
    assert plan["devices"][-1]["kv_bytes"] == plan["kv_tokens"] * plan["kv_bytes_per_token"]
    assert plan["model"]["n_layer"] == 5
    assert plan["server"] == {"prefix_caching": True, "max_batched_tokens": 2048,
                              "max_queue": 256}
    # The same plan `pagellm plan` makes (here the cache is capped by
    # max_seq_len x max_num_seqs, so it does not depend on free memory).
    out = subprocess.run([pagellm_bin, "plan", "-m", str(STORIES), "--json"], check=True,
                         capture_output=True, text=True, timeout=60)
    cli = json.loads(out.stdout)
    for key in ("num_blocks", "kv_tokens", "block_size", "binding_limit", "device_map",
                "max_concurrent_full_sequences"):
        assert plan[key] == cli[key], key
    assert f"pagellm_kv_blocks_total {plan['num_blocks']}" in \
        requests.get(server.url + "/metrics", timeout=10).text


def test_plan_flags_reach_the_engine(start_server):
    srv = start_server("-c", "1000", "--block-size", "8", "--no-prefix-cache",
                       "--max-num-seqs", "4", "--max-batched-tokens", "256", "--kv-type", "f32")
    plan = requests.get(srv.url + "/v1/plan", timeout=10).json()
    assert plan["num_blocks"] == 125 and plan["block_size"] == 8 and plan["kv_type"] == "f32"
    assert plan["kv_mode"] == "kv_tokens" and plan["max_num_seqs"] == 4
    assert plan["server"]["prefix_caching"] is False
    assert plan["server"]["max_batched_tokens"] == 256
    metrics = srv.metrics()
    assert metrics["pagellm_kv_blocks_total"] == 125


def test_c_is_the_cache_and_the_context_everywhere(start_server, pagellm_bin):
    # -c 300 on a 512-token model: a 300-token cache, and max_seq_len 300 in
    # the engine (/v1/models), in /v1/plan and in `pagellm plan`.
    srv = start_server("-c", "300")
    plan = requests.get(srv.url + "/v1/plan", timeout=10).json()
    (m,) = requests.get(srv.url + "/v1/models", timeout=10).json()["data"]
    out = subprocess.run([pagellm_bin, "plan", "-m", str(STORIES), "-c", "300", "--json"],
                         check=True, capture_output=True, text=True, timeout=60)
    cli = json.loads(out.stdout)
    assert plan["max_seq_len"] == cli["max_seq_len"] == m["max_model_len"] == 300
    assert plan["kv_tokens"] == cli["kv_tokens"] == 304  # 19 blocks of 16
    assert cli["max_concurrent_full_sequences"] == 1


def test_virtual_devices_give_the_host_tokens(start_server, client_for):
    host = start_server()
    split = start_server("--device", "cpu:0=64MiB", "--device-map", "0-2:cpu:0,3-4:host")
    plan = requests.get(split.url + "/v1/plan", timeout=10).json()
    assert [d["name"] for d in plan["devices"]] == ["cpu:0", "host"]
    assert plan["device_map"] == "0-2:cpu:0,3-4:host"
    kwargs = dict(model="x", prompt="Once upon a time", max_tokens=40, temperature=0.8, seed=21)
    a = client_for(host).completions.create(**kwargs).choices[0].text
    b = client_for(split).completions.create(**kwargs).choices[0].text
    assert a == b


def test_plan_that_does_not_fit_is_refused(pagellm_bin):
    for flags in (["--headroom", "1000TiB"],
                  ["--device", "cpu:0=1MiB", "--device-map", "0-4:cpu:0"]):
        out = subprocess.run([pagellm_bin, "serve", "-m", str(STORIES), "--port", "0", *flags],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1
        assert "does not fit" in out.stderr


def test_bad_model_or_plan_never_listens(pagellm_bin, tmp_path):
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("not a model, just some text that is long enough for a header")
    cases = [(["-m", str(not_gguf)], "not a GGUF file"),
             (["-m", str(tmp_path / "missing.gguf")], "missing.gguf"),
             (["--headroom", "1000TiB"], "does not fit")]
    for flags, says in cases:
        out = subprocess.run([pagellm_bin, "serve", "--port", "0", *flags],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, flags
        assert "listening" not in out.stdout, flags
        assert out.stderr.startswith("error: ") and says in out.stderr, out.stderr


def test_serve_takes_the_model_flags_and_says_the_cache_size(start_server):
    srv = start_server("--no-mmap", "--no-repack", "-t", "1")
    line = srv.wait_output("ready:")
    plan = requests.get(srv.url + "/v1/plan", timeout=10).json()
    kv_bytes = sum(d["kv_bytes"] for d in plan["devices"])
    assert f"{kv_bytes / 2**20:.2f} MiB" in line, line
    assert "1 threads" in line, line
    srv.wait_output("allocating the KV cache")


def start_stream(srv, max_tokens):
    """A streaming completion in a thread, once its first token arrived:
    (thread, result) as read_stream fills it."""
    first, result = threading.Event(), {}
    t = threading.Thread(target=read_stream, args=(srv, {
        "prompt": "Once", "max_tokens": max_tokens, "ignore_eos": True, "stream": True}, first,
        result))
    t.start()
    assert first.wait(60)
    return t, result


def test_second_signal_exits_at_once(start_server, slow_model):
    srv = start_server("-c", "8192", "--shutdown-timeout", "60", model=slow_model)
    t, result = start_stream(srv, 3000)
    srv.proc.send_signal(signal.SIGINT)
    srv.wait_output("shutting down")
    start = time.monotonic()
    srv.proc.send_signal(signal.SIGINT)
    assert srv.proc.wait(30) == 130
    assert time.monotonic() - start < 10
    t.join(30)
    # It did not wait for the stream: that ended without its last chunk.
    assert result.get("truncated") and "[DONE]" not in result["events"], result


def test_taken_port_says_why(start_server, pagellm_bin):
    srv = start_server()
    out = subprocess.run([pagellm_bin, "serve", "--port", str(srv.port)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"cannot listen on 127.0.0.1:{srv.port}: Address already in use" in out.stderr, \
        out.stderr
    assert "listening" not in out.stdout


def test_large_cache_allocation_shows_progress(start_server):
    # 500,000 tokens x 640 B: a 305 MiB cache, touched in 256 MiB chunks
    # (populated whole: the elastic pool would populate one 32 MiB chunk).
    import os
    srv = start_server("-c", "500000", "--max-seq-len", "500000", "--max-num-seqs", "1",
                       env={**os.environ, "PAGELLM_ELASTIC_POOL": "0"})
    srv.wait_output("allocating: 256.00 MiB of 305.18 MiB")
    srv.wait_output("allocating: 305.18 MiB of 305.18 MiB")


def test_api_key(start_server, client_for):
    import openai
    srv = start_server("--api-key", "s3cret")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                    {"Authorization": "Bearer s3cret2"}):
        r = requests.post(srv.url + "/v1/completions", json={"prompt": "Hi"}, headers=headers,
                          timeout=10)
        assert r.status_code == 401
        err = r.json()["error"]
        assert err["code"] == "invalid_api_key" and set(err) == {"message", "type", "param",
                                                                 "code"}
        assert requests.get(srv.url + "/v1/models", headers=headers, timeout=10).status_code == 401
    try:
        client_for(srv, api_key="wrong").models.list()
        raise AssertionError("expected 401")
    except openai.AuthenticationError as e:
        assert e.status_code == 401
    out = client_for(srv, api_key="s3cret").completions.create(model="x", prompt="Hi",
                                                               max_tokens=2)
    assert out.choices
    # Health and metrics stay public.
    assert requests.get(srv.url + "/health", timeout=10).status_code == 200
    assert requests.get(srv.url + "/metrics", timeout=10).status_code == 200


def test_access_log(server, client_for):
    out = client_for(server).chat.completions.create(model="stories", messages=MSGS, max_tokens=5,
                                                     seed=4)
    stream = client_for(server).completions.create(model="stories", prompt="Once", max_tokens=5,
                                                   stream=True, seed=4)
    list(stream)
    entry = server.wait_access(lambda e: e["id"] == out.id)
    server.wait_access(lambda e: e["path"] == "/v1/completions" and e.get("stream"))
    log = server.access_log()
    assert entry["method"] == "POST" and entry["path"] == "/v1/chat/completions"
    assert entry["status"] == 200 and entry["stream"] is False
    assert entry["prompt_tokens"] == out.usage.prompt_tokens
    assert entry["completion_tokens"] == out.usage.completion_tokens
    assert entry["ttft_ms"] >= 0 and entry["duration_ms"] >= entry["ttft_ms"]
    assert entry["finish_reason"] in ("stop", "length")
    streamed = [e for e in log if e["path"] == "/v1/completions" and e.get("stream")]
    assert streamed and streamed[-1]["completion_tokens"] > 0
    assert re.fullmatch(r"cmpl-[0-9a-f]{24}", streamed[-1]["id"])


def read_stream(srv, body, first_chunk, result):
    with requests.post(srv.url + "/v1/completions", json=body, stream=True, timeout=120) as r:
        result["status"] = r.status_code
        events = []
        result["events"] = events
        try:
            for line in r.iter_lines():
                if line.startswith(b"data: "):
                    events.append(line[6:].decode())
                    first_chunk.set()
        except requests.exceptions.ChunkedEncodingError:
            result["truncated"] = True  # the server exited mid-stream


def test_sigterm_lets_inflight_streams_finish(start_server, slow_model):
    srv = start_server("-c", "8192", "--shutdown-timeout", "60", model=slow_model)
    t, result = start_stream(srv, 150)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    # New work is refused while the stream finishes.
    try:
        r = requests.post(srv.url + "/v1/completions", json={"prompt": "Hi"}, timeout=10)
        assert r.status_code == 503
    except requests.ConnectionError:
        pass
    t.join(120)
    assert srv.proc.wait(60) == 0
    assert result["status"] == 200
    assert result["events"][-1] == "[DONE]"
    assert '"finish_reason":"length"' in result["events"][-2]


def test_an_idle_keep_alive_connection_does_not_hold_the_exit(start_server):
    # A client keeps its connection open between requests (HTTP/1.1
    # keep-alive); the server's exit must not wait for it to time out.
    srv = start_server()
    with requests.Session() as client:
        assert client.get(srv.url + "/health", timeout=10).status_code == 200
        start = time.monotonic()
        assert srv.stop() == 0
        took = time.monotonic() - start
    assert took < 1.5, f"the exit took {took:.2f} s with an idle keep-alive connection open"


def test_sigint_aborts_streams_after_the_timeout(start_server, slow_model):
    srv = start_server("-c", "8192", "--shutdown-timeout", "0.5", model=slow_model)
    t, result = start_stream(srv, 3000)
    start = time.monotonic()
    srv.proc.send_signal(signal.SIGINT)
    t.join(60)
    assert srv.proc.wait(60) == 0
    assert time.monotonic() - start < 15
    assert result["events"][-1] == "[DONE]"
    assert '"error"' in result["events"][-2]
    assert "shutting down" in result["events"][-2]
