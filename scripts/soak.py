#!/usr/bin/env python3
"""Soak test of `pagellm serve`: mixed random traffic for a bounded time.

Starts the server on 127.0.0.1 (a port the kernel picks; nothing else is
contacted) with a short queue, a small KV cache, chunked prefill and
prompt-lookup speculation (--spec-ngram 3), runs WORKERS client threads for
MINUTES minutes, and makes sure every path below is taken:

  * well-formed requests: chat and completions, streamed or not, n > 1, stop
    strings, seeds, repetitive prompts (speculation proposes and accepts);
  * constrained requests: a json_schema response_format (the reply must parse
    and match the schema) and a GBNF grammar (the reply must match it);
  * the queue full: 503 with a Retry-After header;
  * preemption and recompute: the cache holds a few sequences only;
  * aborts: streams cut off after a few chunks, and requests whose connection
    is closed before the first byte of the answer (mid-prefill or queued);
  * bad inputs: malformed JSON, wrong types, out-of-range values, ids outside
    the vocabulary, prompts over the context, unknown routes;

then asserts:

  * the server never crashed and exits 0 on SIGTERM;
  * every request completed (finish_reason stop/length), was aborted by the
    client, or was refused with a 4xx or a 503 (with Retry-After) and a JSON
    error body; never another 5xx;
  * each path above was taken at least once (--no-require-paths: not checked);
  * at the end no request is in flight and every KV block is free;
  * RSS came back: after the traffic stops, within 10 % (--rss-tolerance) of
    its warm value (the median of the samples in the second fifth of the run).

Prints the counts per path (client side and the server's /metrics) and exits
1 if an assertion failed.
"""
import argparse
import json
import os
import pathlib
import random
import re
import signal
import socket
import statistics
import struct
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
        if m:  # labeled series as 'name{labels}'
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
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


# Constrained requests: a JSON schema (chat, response_format) and a GBNF
# grammar (completions), each with a check of the reply.
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
                                           "pet": {"enum": ["cat", "dog"]}},
          "required": ["n", "pet"], "additionalProperties": False}
GRAMMAR = 'root ::= ("yes" | "no") " " [0-9]{1,3} "."'
GRAMMAR_RE = re.compile(r"^(yes|no) [0-9]{1,3}\.$")


def schema_ok(text):
    try:
        v = json.loads(text)
    except ValueError:
        return False
    return (isinstance(v, dict) and set(v) == {"n", "pet"} and isinstance(v["n"], int)
            and not isinstance(v["n"], bool) and 0 <= v["n"] <= 99 and v["pet"] in ("cat", "dog"))


class Client:
    def __init__(self, url, stats, rng, n_vocab, n_ctx):
        self.url, self.stats, self.rng = url, stats, rng
        self.n_vocab, self.n_ctx = n_vocab, n_ctx
        self.s = requests.Session()
        self.host, self.port = url.split("//")[1].split(":")

    def text(self, lo=1, hi=12):
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(lo, hi)))

    def prompt_text(self):
        r = self.rng
        x = r.random()
        if x < 0.3:  # repetitive: prompt lookup (--spec-ngram) finds drafts
            return " ".join([self.text(3, 6)] * r.randint(3, 8))
        if x < 0.45:  # long: many blocks, chunked prefill, preemption
            return self.text(60, 120)
        return self.text()

    def sampling(self):
        r = self.rng
        body = {"max_tokens": r.randint(1, 64)}
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
            msgs = [{"role": "user", "content": self.prompt_text()}]
            if r.random() < 0.3:
                msgs = [{"role": "system", "content": self.text()}] + msgs
            return "/v1/chat/completions", {"model": "m", "messages": msgs, **self.sampling()}
        prompt = self.prompt_text() if r.random() < 0.8 else [r.randrange(self.n_vocab)
                                                                for _ in range(r.randint(1, 20))]
        return "/v1/completions", {"model": "m", "prompt": prompt, **self.sampling()}

    def refused(self, resp, what):
        """A non-200 answer to a well-formed request: a clean refusal or a failure."""
        if resp.status_code == 503 and is_error_body(resp):
            if not resp.headers.get("Retry-After"):
                return self.stats.fail(f"{what}: 503 without Retry-After")
            self.stats.add("refused_503")
            # Back off a little, as a client that honors Retry-After would.
            time.sleep(self.rng.uniform(0, 0.25))
            return
        if resp.status_code == 400 and is_error_body(resp) and \
                "context" in resp.json()["error"]["message"]:
            return self.stats.add("refused_context")
        self.stats.fail(f"{what}: {resp.status_code} {resp.text[:200]}")

    def read_choices(self, path, resp, stream):
        """{index: (finish_reason, text)} of a 200 answer, or None after an error in the stream."""
        reasons, texts = {}, {}
        chat = path.endswith("chat/completions")
        if stream:
            for line in resp.iter_lines():
                if not line or not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    return None
                for c in chunk.get("choices", []):
                    i = c["index"]
                    piece = (c.get("delta") or {}).get("content") if chat else c.get("text")
                    texts[i] = texts.get(i, "") + (piece or "")
                    if c.get("finish_reason"):
                        reasons[i] = c["finish_reason"]
        else:
            for c in resp.json()["choices"]:
                i = c["index"]
                reasons[i] = c["finish_reason"]
                texts[i] = (c["message"]["content"] or "") if chat else c["text"]
        return {i: (reasons[i], texts.get(i, "")) for i in reasons}

    def request(self, path, body, label):
        """Sends a well-formed request; returns its choices, or None (counted)."""
        stream = bool(body.get("stream"))
        self.stats.add(label)
        try:
            resp = self.s.post(self.url + path, json=body, stream=stream, timeout=120)
        except requests.RequestException as e:
            return self.stats.fail(f"{label} {path}: connection error {e!r}")
        if resp.status_code != 200:
            return self.refused(resp, f"{label} {path}")
        try:
            choices = self.read_choices(path, resp, stream)
        except (requests.RequestException, ValueError, KeyError, TypeError) as e:
            return self.stats.fail(f"{label} {path}: bad response {e!r}")
        if choices is None:
            return self.stats.fail(f"{label} {path}: an error in the stream")
        n = body.get("n", 1)
        if len(choices) != n or not {r for r, _ in choices.values()} <= {"stop", "length"}:
            return self.stats.fail(f"{label} {path}: finish reasons {choices} for n={n}")
        self.stats.add("completed")
        return choices

    # -- well-formed requests ------------------------------------------------
    def good(self):
        path, body = self.good_body()
        body["stream"] = self.rng.random() < 0.5
        self.request(path, body, "well_formed")

    # -- constrained: json_schema and grammar, replies checked ---------------
    def constrained(self):
        r = self.rng
        stream = r.random() < 0.5
        if r.random() < 0.5:
            body = {"messages": [{"role": "user", "content": self.text()}], "max_tokens": 128,
                    "temperature": r.choice([0, 0.7]), "stream": stream,  # (the model pads with newlines)
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "pet", "schema": SCHEMA}}}
            kind, path, ok = "json_schema", "/v1/chat/completions", schema_ok
        else:
            body = {"prompt": self.text(), "max_tokens": 16, "temperature": r.choice([0, 0.7]),
                    "grammar": GRAMMAR, "stream": stream}
            kind, path, ok = "grammar", "/v1/completions", lambda t: bool(GRAMMAR_RE.match(t))
        choices = self.request(path, body, "constrained")
        if not choices:
            return
        for reason, text in choices.values():
            if reason == "stop":
                if not ok(text):
                    self.stats.add("completed", -1)  # counted as a failure instead
                    return self.stats.fail(f"{kind}: reply {text!r} does not match")
                self.stats.add(f"constrained_{kind}_valid")
            else:
                self.stats.add(f"constrained_{kind}_cut")

    # -- aborts: streams cut off after a few chunks ----------------------------
    def abort(self):
        path, body = self.good_body()
        body.update(stream=True, max_tokens=self.rng.randint(32, 200), temperature=0.8)
        body.pop("stop", None)
        self.stats.add("abort_mid_stream")
        try:
            with self.s.post(self.url + path, json=body, stream=True, timeout=120) as resp:
                if resp.status_code != 200:
                    return self.refused(resp, f"abort {path}")
                self.stats.add("aborted_mid_stream")
                want = self.rng.randint(0, 4)
                for i, _ in enumerate(resp.iter_lines()):
                    if i >= want:
                        break
                resp.raw._fp.fp.raw._sock.shutdown(2)  # drop the connection mid-stream
        except (requests.RequestException, OSError, AttributeError):
            pass  # (counted as aborted once the answer started)
        self.s = requests.Session()  # the old connection is gone

    # -- aborts before the first byte of the answer: mid-prefill (or queued) ---
    def abort_prefill(self):
        r = self.rng
        if r.random() < 0.5:
            path, body = "/v1/completions", {"prompt": self.text(80, 150)}
        else:
            path, body = "/v1/chat/completions", {"messages": [{"role": "user",
                                                                "content": self.text(80, 150)}]}
        body.update(max_tokens=r.randint(16, 64), stream=r.random() < 0.7)
        data = json.dumps(body).encode()
        self.stats.add("abort_before_answer")
        try:
            with socket.create_connection((self.host, int(self.port)), timeout=10) as sock:
                sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n"
                             f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
                             .encode() + data)
                time.sleep(r.uniform(0, 0.02))
                if r.random() < 0.5:  # a reset rather than an orderly close
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.stats.add("aborted_before_answer")
        except OSError as e:
            self.stats.fail(f"abort_prefill: {e!r}")

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
        if resp.status_code == 503 and is_error_body(resp) and resp.headers.get("Retry-After"):
            return self.stats.add("refused_503")
        if 400 <= resp.status_code < 500 and (is_error_body(resp) or resp.status_code == 404):
            return self.stats.add("bad_input_refused")
        self.stats.fail(f"bad {path} {str(body)[:80]}: {resp.status_code} {resp.text[:200]}")

    def run(self, deadline):
        while time.monotonic() < deadline:
            x = self.rng.random()
            if x < 0.5:
                self.good()
            elif x < 0.62:
                self.constrained()
            elif x < 0.72:
                self.abort()
            elif x < 0.82:
                self.abort_prefill()
            else:
                self.bad()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--pagellm", default=str(ROOT / "build" / "pagellm"))
    ap.add_argument("--model", default=str(ROOT / "tests" / "data" / "stories260K.gguf"))
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--max-queue", type=int, default=8,
                    help="server's --max-queue (below --workers: the 503 path is exercised)")
    ap.add_argument("--max-num-seqs", type=int, default=6, help="server's --max-num-seqs")
    ap.add_argument("--kv-tokens", type=int, default=384,
                    help="server's -c (a few sequences' worth: preemption is exercised)")
    ap.add_argument("--max-seq-len", type=int, default=256, help="server's --max-seq-len")
    ap.add_argument("--max-batched-tokens", type=int, default=64,
                    help="server's --max-batched-tokens (long prompts take several steps)")
    ap.add_argument("--spec-ngram", type=int, default=3, help="server's --spec-ngram (0: off)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-tolerance", type=float, default=0.10,
                    help="RSS at the end may exceed its warm value by this fraction")
    ap.add_argument("--no-require-paths", action="store_true",
                    help="do not fail when a path (503, preemption, ...) was not taken")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra argument for pagellm serve (repeatable)")
    ap.add_argument("--cache-tiers", action="store_true",
                    help="give the server a host tier (a small --cache-host, so that it "
                         "hands blocks down) and a disk tier (a temporary --cache-dir, a small "
                         "--cache-disk so its LRU evicts too) and require their paths: "
                         "blocks stored, restored on a hit, evicted; files written")
    args = ap.parse_args()
    cache_dir = tempfile.TemporaryDirectory(prefix="pagellm-soak-tiers-") if args.cache_tiers else None
    if cache_dir:
        args.server_arg += ["--cache-host", "128K", "--cache-dir", cache_dir.name,
                            "--cache-disk", "4M"]

    log = tempfile.NamedTemporaryFile(prefix="pagellm-soak-", suffix=".log", delete=False)
    cmd = [args.pagellm, "serve", "-m", args.model, "--host", "127.0.0.1", "--port", "0",
           "--max-num-seqs", str(args.max_num_seqs), "--max-queue", str(args.max_queue),
           "-c", str(args.kv_tokens), "--max-seq-len", str(args.max_seq_len),
           "--max-batched-tokens", str(args.max_batched_tokens),
           "--spec-ngram", str(args.spec_ngram), *args.server_arg]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    stats, rss, ok, m, end_rss = Stats(), [], True, {}, None
    try:
        url = None
        for _ in range(600):
            mt = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", pathlib.Path(log.name).read_bytes())
            if mt:
                url = f"http://127.0.0.1:{int(mt.group(1))}"
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
              f"(log {log.name})\nsoak: {' '.join(cmd[1:])}")

        start = time.monotonic()
        deadline = start + args.minutes * 60
        clients = [Client(url, stats, random.Random(args.seed * 1000 + i), n_vocab, n_ctx)
                   for i in range(args.workers)]
        threads = [threading.Thread(target=c.run, args=(deadline,), daemon=True) for c in clients]
        for t in threads:
            t.start()
        while time.monotonic() < deadline and proc.poll() is None:
            rss.append((time.monotonic() - start, rss_bytes(proc.pid)))
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        for t in threads:
            t.join(timeout=180)
        if proc.poll() is not None:
            stats.fail(f"the server died (exit {proc.returncode})")
        else:
            # Aborted requests are noticed by the server asynchronously: wait for quiet.
            quiet_by = time.monotonic() + 30
            while True:
                m = metrics(url)
                if (m.get("pagellm_requests_in_flight", 1) == 0
                        and m.get("pagellm_kv_blocks_used", 1) == 0) or time.monotonic() > quiet_by:
                    break
                time.sleep(0.25)
            time.sleep(1)
            end_rss = rss_bytes(proc.pid)
            m = metrics(url)
            if m.get("pagellm_requests_in_flight") != 0:
                stats.fail(f"{m.get('pagellm_requests_in_flight')} requests still in flight")
            if m.get("pagellm_kv_blocks_used") != 0:
                stats.fail(f"{m.get('pagellm_kv_blocks_used')} KV blocks still held")
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

    def srv(name, **labels):
        if labels:
            want = {f'{k}="{v}"' for k, v in labels.items()}
            return int(sum(v for k, v in m.items() if k.startswith(name + "{")
                           and want <= set(k[len(name) + 1:-1].split(","))))
        return int(m.get(name, 0))

    paths = [  # (path, count, where it was counted)
        ("completed (finish stop/length)", c.get("completed", 0), "client"),
        ("constrained json_schema, reply valid", c.get("constrained_json_schema_valid", 0), "client"),
        ("constrained grammar, reply valid", c.get("constrained_grammar_valid", 0), "client"),
        ("refused 503 + Retry-After", c.get("refused_503", 0), "client"),
        ("preempted (recomputed later)", srv("pagellm_preemptions_total"), "server"),
        ("aborted mid-stream", c.get("aborted_mid_stream", 0), "client"),
        ("closed before the answer (prefill)", c.get("aborted_before_answer", 0), "client"),
        ("finished as aborted", srv("pagellm_request_finished_total", finish_reason="abort"), "server"),
        ("speculative tokens proposed", srv("pagellm_spec_proposed_total"), "server"),
        ("bad input refused 4xx", c.get("bad_input_refused", 0), "client"),
    ]
    if args.cache_tiers:
        paths += [
            ("host tier: blocks stored from the pool", srv("pagellm_host_tier_stored_total"),
             "server"),
            ("host tier: blocks restored on a hit", srv("pagellm_host_tier_hits_total"), "server"),
            ("tiers: blocks copied in beside a forward pass",
             srv("pagellm_tier_restores_overlapped_total"), "server"),
            ("host tier: blocks handed to the disk tier", srv("pagellm_host_tier_evicted_total"),
             "server"),
            ("disk tier: block files written", srv("pagellm_disk_tier_files_written_total"), "server"),
            ("disk tier: blocks restored on a hit", srv("pagellm_disk_tier_hits_total"), "server"),
            ("disk tier: files evicted by its LRU", srv("pagellm_disk_tier_files_evicted_total"),
             "server"),
        ]
    # Every request ends one way: completed, aborted by the client, refused
    # (4xx or 503), or a failure (listed below).
    sent = sum(c.get(k, 0) for k in ("well_formed", "constrained", "abort_mid_stream",
                                     "abort_before_answer", "bad_input"))
    ends = {"completed": c.get("completed", 0),
            "aborted": c.get("aborted_mid_stream", 0) + c.get("aborted_before_answer", 0),
            "refused": sum(c.get(k, 0) for k in ("refused_503", "refused_context",
                                                "bad_input_refused")),
            "failed": c.get("FAILED", 0)}
    print(f"soak: {sent} requests in {args.minutes} min: {ends['completed']} completed, "
          f"{ends['aborted']} aborted by the client, {ends['refused']} refused (4xx or 503), "
          f"{ends['failed']} failed; per path:")
    if sum(ends.values()) != sent:
        stats.fail(f"{sent} requests sent but {sum(ends.values())} accounted for")
    for name, n, where in paths:
        print(f"soak:   {name:<38} {n:>8}  ({where})")
    print("soak:   also: {} constrained replies cut by max_tokens, {} refused over the context, "
          "{} speculative tokens accepted, {} answered 503 by the server, "
          "{} engine steps, {} KV blocks".format(
              c.get("constrained_json_schema_cut", 0) + c.get("constrained_grammar_cut", 0),
              c.get("refused_context", 0),
              srv("pagellm_spec_accepted_total"), srv("pagellm_http_requests_total", status="503"),
              srv("pagellm_engine_steps_total"), srv("pagellm_kv_blocks_total")))
    if not args.no_require_paths and m:
        for name, n, _ in paths:
            if n == 0 and (args.spec_ngram or "speculative" not in name):
                stats.fail(f"path not taken: {name}")
    # RSS: back within the tolerance of its warm value once the traffic stopped.
    mib = 2 ** 20
    warm = [b for t, b in rss if 0.2 * args.minutes * 60 <= t < 0.4 * args.minutes * 60]
    warm = statistics.median(warm or [b for _, b in rss])
    if end_rss is not None:
        print(f"soak: RSS start {rss[0][1] / mib:.1f} MiB, warm {warm / mib:.1f} MiB, max "
              f"{max(b for _, b in rss) / mib:.1f} MiB, at the end {end_rss / mib:.1f} MiB "
              f"(allowed {warm * (1 + args.rss_tolerance) / mib:.1f}); "
              f"{time.monotonic() - t0:.0f} s in all")
        if end_rss > warm * (1 + args.rss_tolerance):
            stats.fail(f"RSS at the end {end_rss / mib:.1f} MiB is over {1 + args.rss_tolerance:.2f} "
                       f"x its warm value {warm / mib:.1f} MiB")
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
