"""Concurrent streams, aborts on disconnect, queue limits."""
import json
import socket
import threading
import time

import requests

STORY = "Once upon a time, there was a little girl named Lily. She"
PROMPTS = ["Once upon a time", "Lily wanted", "The little cat was sad because",
           "One day, Tom and his dog went to the park.", "Ben had 3 red cars",
           "The sun was hot and", "Sam and Sue", "In the big forest there"]


def stream_completion(client, i):
    text, finish = "", None
    for chunk in client.completions.create(model="stories", prompt=PROMPTS[i % 8],
                                           max_tokens=40 + i, temperature=0.9, seed=100 + i,
                                           stream=True):
        for c in chunk.choices:
            text += c.text
            finish = c.finish_reason or finish
    return text, finish


def test_parallel_streams_match_solo(server, client_for):
    client = client_for(server)
    solo = [stream_completion(client, i) for i in range(16)]
    results = [None] * 16
    errors = []

    def run(i):
        try:
            results[i] = stream_completion(client_for(server), i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert results == solo
    server.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)


def test_burst_of_64_connections(server, client_for):
    """64 clients at once: none waits for a dropped SYN (a listen backlog
    too short) or a busy thread; all 64 streams complete."""
    latencies, errors = [], []

    def health():
        start = time.monotonic()
        try:
            with requests.Session() as s:
                assert s.get(server.url + "/health", timeout=10).status_code == 200
            latencies.append(time.monotonic() - start)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=health) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and len(latencies) == 64
    assert max(latencies) < 0.9  # a dropped SYN is retried after 1 s

    results = [None] * 64

    def complete(i):
        try:
            results[i] = stream_completion(client_for(server), i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=complete, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert all(r is not None and r[1] in ("stop", "length") for r in results)
    server.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)


def test_short_requests_are_not_starved_by_long_streams(start_server, slow_model, client_for):
    srv = start_server("-c", "16384", model=slow_model)
    opened = []
    try:
        for _ in range(4):
            r = requests.post(srv.url + "/v1/completions", stream=True, timeout=60, json={
                "prompt": "Once", "max_tokens": 3000, "ignore_eos": True, "stream": True})
            assert r.status_code == 200
            opened.append(r)
        start = time.monotonic()
        for _ in range(5):
            assert requests.get(srv.url + "/health", timeout=5).status_code == 200
            assert requests.get(srv.url + "/metrics", timeout=5).status_code == 200
        assert time.monotonic() - start < 5
        # A short completion gets through while the long ones run.
        out = client_for(srv).completions.create(model="slow", prompt="Hi", max_tokens=2)
        assert out.choices[0].text is not None
    finally:
        for r in opened:
            r.close()


def raw_stream(url, body):
    """Opens a streaming POST on a raw socket; returns (socket, file)."""
    host, port = url.replace("http://", "").split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    payload = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    return s, s.makefile("rb")


def test_disconnect_aborts_and_frees_blocks(start_server, slow_model):
    srv = start_server("-c", "16384", model=slow_model)
    assert srv.metrics()["pagellm_kv_blocks_used"] == 0
    s, f = raw_stream(srv.url, {"prompt": "Once upon a time", "max_tokens": 3000,
                                "ignore_eos": True, "stream": True})
    data_lines = 0
    while data_lines < 3:
        line = f.readline()
        assert line, "stream ended early"
        data_lines += line.startswith(b"data: ")
    assert srv.metrics()["pagellm_kv_blocks_used"] > 0
    f.close()
    s.close()
    start = time.monotonic()
    srv.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0, timeout=10)
    # At once: far sooner than the 3000 tokens would take (about 30 s here).
    assert time.monotonic() - start < 5
    assert srv.metrics()['pagellm_request_finished_total{finish_reason="abort"}'] == 1
    assert srv.metrics()["pagellm_requests_in_flight"] == 0
    entry = srv.wait_access(lambda e: e["path"] == "/v1/completions")
    assert entry["error"] == "client disconnected"
    assert 0 < entry["completion_tokens"] < 3000


def test_queue_full_gives_503(start_server, slow_model, client_for):
    import openai
    srv = start_server("-c", "16384", "--max-queue", "2", model=slow_model)
    long_body = {"prompt": "Once", "max_tokens": 3000, "ignore_eos": True, "stream": True}
    a = requests.post(srv.url + "/v1/completions", json=long_body, stream=True, timeout=60)
    b = requests.post(srv.url + "/v1/completions", json=long_body, stream=True, timeout=60)
    try:
        assert a.status_code == 200 and b.status_code == 200
        r = requests.post(srv.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2},
                          timeout=30)
        assert r.status_code == 503
        assert r.headers.get("Retry-After") == "1"
        err = r.json()["error"]
        assert err["code"] == "queue_full" and err["type"] and err["message"]
        try:
            client_for(srv).chat.completions.create(
                model="slow", messages=[{"role": "user", "content": "x"}], max_tokens=2)
            raise AssertionError("expected a 503")
        except openai.APIStatusError as e:
            assert e.status_code == 503
        # A prompt list that does not fit is refused whole.
        r = requests.post(srv.url + "/v1/completions", json={"prompt": ["a", "b"]}, timeout=30)
        assert r.status_code == 503
    finally:
        a.close()
        b.close()
    srv.wait_metric("pagellm_requests_in_flight", lambda v: v == 0)
    r = requests.post(srv.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2},
                      timeout=30)
    assert r.status_code == 200
