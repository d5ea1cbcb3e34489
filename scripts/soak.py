#!/usr/bin/env python3
"""Soak test of `pagellm serve`: mixed random traffic for a bounded time.

Starts the server on 127.0.0.1 (a port the kernel picks; nothing else is
contacted), runs WORKERS client threads for MINUTES minutes sending a random
mix of well-formed requests (chat and completions, streamed or not, n > 1,
stop strings, seeds), streams cut off mid-way (aborts) and bad inputs
(malformed JSON, wrong types, out-of-range values, ids outside the
vocabulary, prompts over the context, unknown routes), then asserts:

  * the server never crashed and exits 0 on SIGTERM;
  * every well-formed request completed (finish_reason stop/length) or got a
    clean error (a JSON error body; 503 when the queue is full), every bad
    one a 4xx with a JSON error body, never a 5xx other than 503;
  * at the end no request is in flight and every KV block is free;
  * RSS is stable: the median of the last quarter of the samples (after a
    warm-up) is within max(--rss-slack-mib, 5 %) of the first quarter's.

Prints the figures (requests, aborts, errors by kind, RSS start/end) and
exits 1 if an assertion failed.
"""
import argparse
import json
import os
import pathlib
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORDS = ("Once upon a time there was a little girl named Lily who liked the big red ball "
         "and the dog ran to the park with Tom and Sue because the sun was hot").split()


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def metrics(url):
    text = requests.get(url + "/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(pagellm_[a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m and not m.group(2):
            out[m.group(1)] = float(m.group(3))
    return out


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def fail(self, what):
        with self.lock:
            self.failures.append(what)
            self.counts["FAILED"] = self.counts.get("FAILED", 0) + 1


def is_error_body(resp):
    try:
        err = resp.json()["error"]
        return isinstance(err["message"], str) and "type" in err
    except Exception:
        return False


class Client:
    def __init__(self, url, stats, rng, n_vocab, n_ctx):
        self.url, self.stats, self.rng = url, stats, rng
        self.n_vocab, self.n_ctx = n_vocab, n_ctx
        self.s = requests.Session()

    def text(self, lo=1, hi=12):
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(lo, hi)))

    def sampling(self):
        r = self.rng
        body = {"max_tokens": r.randint(1, 48)}
        if r.random() < 0.5:
            body["temperature"] = 0
        else:
            body.update(temperature=round(r.uniform(0.1, 1.5), 2), seed=r.randint(0, 1 << 30))
            if r.random() < 0.3:
                body["top_p"] = round(r.uniform(0.1, 1.0), 2)
        if r.random() < 0.2:
            body["stop"] = [r.choice(WORDS), "."][: r.randint(1, 2)]
        if r.random() < 0.15:
            body["n"] = r.randint(2, 3)
        return body

    def good_body(self):
        r = self.rng
        if r.random() < 0.5:
            msgs = [{"role": "user", "content": self.text()}]
            if r.random() < 0.3:
                msgs = [{"role": "system", "content": self.text()}] + msgs
            return "/v1/chat/completions", {"model": "m", "messages": msgs, **self.sampling()}
        prompt = self.text() if r.random() < 0.8 else [r.randrange(self.n_vocab)
                                                         for _ in range(r.randint(1, 20))]
        return "/v1/completions", {"model": "m", "prompt": prompt, **self.sampling()}

    # -- well-formed requests ------------------------------------------------
    def good(self):
        path, body = self.good_body()
        stream = self.rng.random() < 0.5
        body["stream"] = stream
        self.stats.add("well_formed")
        try:
            resp = self.s.post(self.url + path, json=body, stream=stream, timeout=120)
        except requests.RequestException as e:
            return self.stats.fail(f"{path}: connection error {e!r}")
        if resp.status_code != 200:
            if resp.status_code in (503, 429) and is_error_body(resp):
                return self.stats.add("clean_error_busy")
            if resp.status_code == 400 and is_error_body(resp) and \
                    "context" in resp.json()["error"]["message"]:
                return self.stats.add("clean_error_context")
            return self.stats.fail(f"{path}: {resp.status_code} {resp.text[:200]}")
        n = body.get("n", 1)
        reasons = {}
        try:
            if stream:
                for line in resp.iter_lines():
                    if not line or not line.startswith(b"data: "):
                        continue
                    data = line[6:]
                    if data == b"[DONE]":
                        break
                    chunk = json.loads(data)
                    if "error" in chunk:
                        self.stats.add("clean_error_in_stream")
                        return
                    for c in chunk.get("choices", []):
                        if c.get("finish_reason"):
                            reasons[c["index"]] = c["finish_reason"]
            else:
                for c in resp.json()["choices"]:
                    reasons[c["index"]] = c["finish_reason"]
        except (requests.RequestException, ValueError, KeyError) as e:
            return self.stats.fail(f"{path}: bad response {e!r}")
        if len(reasons) != n or not set(reasons.values()) <= {"stop", "length"}:
            return self.stats.fail(f"{path}: finish reasons {reasons} for n={n}")
        self.stats.add("completed")

    # -- aborts: streams cut off after a few chunks ----------------------------
    def abort(self):
        path, body = self.good_body()
        body.update(stream=True, max_tokens=self.rng.randint(32, 200), temperature=0.8)
        body.pop("stop", None)
        self.stats.add("aborted")
        try:
            with self.s.post(self.url + path, json=body, stream=True, timeout=120) as resp:
                if resp.status_code != 200:
                    if resp.status_code in (503, 429, 400) and is_error_body(resp):
                        return
                    return self.stats.fail(f"abort {path}: {resp.status_code}")
                want = self.rng.randint(0, 4)
                for i, _ in enumerate(resp.iter_lines()):
                    if i >= want:
                        break
                resp.raw._fp.fp.raw._sock.shutdown(2)  # drop the connection mid-stream
        except (requests.RequestException, OSError, AttributeError):
            pass
        self.s = requests.Session()  # the old connection is gone

    # -- bad inputs ------------------------------------------------------------
    def bad(self):
        r, ctx = self.rng, self.n_ctx
        cases = [
            ("/v1/chat/completions", b"{not json"),
            ("/v1/chat/completions", b"[1, 2, 3]"),
            ("/v1/chat/completions", bytes(r.randrange(256) for _ in range(r.randint(0, 64)))),
            ("/v1/chat/completions", {"messages": "hello"}),
            ("/v1/chat/completions", {"messages": []}),
            ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                      "temperature": "hot"}),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                      "max_tokens": -5}),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "n": 10000}),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                      "top_p": 7}),
            ("/v1/completions", {"prompt": [self.n_vocab + 5, -1]}),
            # (An empty string is not bad: it is the BOS token alone, as in generate.)
            ("/v1/completions", {"prompt": [[]]}),
            ("/v1/completions", {"prompt": [1] * (ctx + 10)}),
            ("/v1/completions", {"prompt": "x", "max_tokens": 10 ** 30}),
            ("/v1/completions", {"prompt": {"nested": ["a"]}}),
            ("/v1/nothing", {"prompt": "x"}),
        ]
        path, body = r.choice(cases)
        self.stats.add("bad_input")
        try:
            if isinstance(body, bytes):
                resp = self.s.post(self.url + path, data=body, timeout=60,
                                   headers={"Content-Type": "application/json"})
            else:
                resp = self.s.post(self.url + path, json=body, timeout=60)
        except requests.RequestException as e:
            return self.stats.fail(f"bad {path}: connection error {e!r}")
        if resp.status_code == 503 and is_error_body(resp):
            return self.stats.add("clean_error_busy")
        if 400 <= resp.status_code < 500 and (is_error_body(resp) or resp.status_code == 404):
            return self.stats.add("bad_input_refused")
        self.stats.fail(f"bad {path} {str(body)[:80]}: {resp.status_code} {resp.text[:200]}")

    def run(self, deadline):
        while time.monotonic() < deadline:
            x = self.rng.random()
            if x < 0.6:
                self.good()
            elif x < 0.75:
                self.abort()
            else:
                self.bad()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--pagellm", default=str(ROOT / "build" / "pagellm"))
    ap.add_argument("--model", default=str(ROOT / "tests" / "data" / "stories260K.gguf"))
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--max-queue", type=int, default=32,
                    help="server's --max-queue (below --workers: the 503 path is exercised)")
    ap.add_argument("--max-num-seqs", type=int, default=8, help="server's --max-num-seqs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-slack-mib", type=float, default=16)
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra argument for pagellm serve (repeatable)")
    args = ap.parse_args()

    log = tempfile.NamedTemporaryFile(prefix="pagellm-soak-", suffix=".log", delete=False)
    cmd = [args.pagellm, "serve", "-m", args.model, "--host", "127.0.0.1", "--port", "0",
           "--max-num-seqs", str(args.max_num_seqs), "--max-queue", str(args.max_queue),
           *args.server_arg]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    stats, rss, ok = Stats(), [], True
    try:
        url = None
        for _ in range(600):
            m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", pathlib.Path(log.name).read_bytes())
            if m:
                url = f"http://127.0.0.1:{int(m.group(1))}"
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if url is None:
            print(f"soak: the server did not start:\n{pathlib.Path(log.name).read_text()}")
            return 1
        while requests.get(url + "/health", timeout=10).status_code != 200:
            time.sleep(0.2)
        model = requests.get(url + "/v1/plan", timeout=10).json().get("model", {})
        n_vocab, n_ctx = model.get("n_vocab", 512), model.get("n_ctx_train", 512)
        print(f"soak: {args.minutes} min, {args.workers} workers, server pid {proc.pid} at {url} "
              f"(log {log.name})")

        start = time.monotonic()
        deadline = start + args.minutes * 60
        clients = [Client(url, stats, random.Random(args.seed * 1000 + i), n_vocab, n_ctx)
                   for i in range(args.workers)]
        threads = [threading.Thread(target=c.run, args=(deadline,), daemon=True) for c in clients]
        for t in threads:
            t.start()
        while time.monotonic() < deadline and proc.poll() is None:
            rss.append((time.monotonic() - start, rss_bytes(proc.pid)))
            time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
        for t in threads:
            t.join(timeout=180)
        if proc.poll() is not None:
            stats.fail(f"the server died (exit {proc.returncode})")
        else:
            rss.append((time.monotonic() - start, rss_bytes(proc.pid)))
            # Aborted streams are noticed by the server asynchronously: wait for quiet.
            quiet_by = time.monotonic() + 30
            while True:
                m = metrics(url)
                if (m.get("pagellm_requests_in_flight", 1) == 0
                        and m.get("pagellm_kv_blocks_used", 1) == 0) or time.monotonic() > quiet_by:
                    break
                time.sleep(0.25)
            if m.get("pagellm_requests_in_flight") != 0:
                stats.fail(f"{m.get('pagellm_requests_in_flight')} requests still in flight")
            if m.get("pagellm_kv_blocks_used") != 0:
                stats.fail(f"{m.get('pagellm_kv_blocks_used')} KV blocks still held")
            print(f"soak: at the end: in flight {m.get('pagellm_requests_in_flight')}, KV blocks used "
                  f"{m.get('pagellm_kv_blocks_used')} of {m.get('pagellm_kv_blocks_total')} "
                  f"(cached {m.get('pagellm_kv_blocks_cached')}), preemptions "
                  f"{m.get('pagellm_preemptions_total')}, engine steps {m.get('pagellm_engine_steps_total')}")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = "killed"
            if code != 0:
                stats.fail(f"the server exited with {code} on SIGTERM")

    c = stats.counts
    print("soak: requests: {} well-formed ({} completed, {} clean errors: {} busy, {} context, "
          "{} in stream), {} aborted mid-stream, {} bad inputs ({} refused cleanly)".format(
              c.get("well_formed", 0), c.get("completed", 0),
              c.get("clean_error_busy", 0) + c.get("clean_error_context", 0) +
              c.get("clean_error_in_stream", 0), c.get("clean_error_busy", 0),
              c.get("clean_error_context", 0), c.get("clean_error_in_stream", 0),
              c.get("aborted", 0), c.get("bad_input", 0), c.get("bad_input_refused", 0)))
    # RSS trend after a warm-up of a fifth of the run.
    steady = [b for t, b in rss if t >= 0.2 * args.minutes * 60] or [b for _, b in rss]
    q = max(1, len(steady) // 4)
    first, last = statistics.median(steady[:q]), statistics.median(steady[-q:])
    bound = max(args.rss_slack_mib * 2 ** 20, 0.05 * first)
    mib = 2 ** 20
    print(f"soak: RSS start {rss[0][1] / mib:.1f} MiB, after warm-up {first / mib:.1f} MiB, "
          f"end {last / mib:.1f} MiB, max {max(b for _, b in rss) / mib:.1f} MiB "
          f"({len(rss)} samples; allowed growth {bound / mib:.1f} MiB)")
    if last - first > bound:
        stats.fail(f"RSS grew by {(last - first) / mib:.1f} MiB after warm-up")
    for f in stats.failures[:20]:
        print(f"soak: FAIL: {f}")
    if stats.failures:
        ok = False
        print(f"soak: {len(stats.failures)} failure(s); server log: {log.name}")
    else:
        os.unlink(log.name)
    print("soak: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
