"""Fixtures for the end-to-end server tests.

Each test talks to a real `pagellm serve` process listening on 127.0.0.1 on a
port the kernel picked (--port 0; the server prints it). Servers are stopped
with SIGTERM (SIGKILL if that takes over 30 s) when their fixture ends.

The binary comes from --pagellm=PATH, else $PAGELLM_BINARY, else build/pagellm.
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import threading
import time

import pytest
import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
STORIES = DATA / "stories260K.gguf"
START_TIMEOUT_S = 60


def complete_cached(server, p, max_tokens=8):
    """A greedy completion of token ids `p`: its text and usage's cached_tokens
    (the prompt tokens the prefix cache or its tiers supplied)."""
    r = requests.post(server.url + "/v1/completions", timeout=120,
                      json={"model": "m", "prompt": p, "max_tokens": max_tokens, "temperature": 0})
    assert r.status_code == 200, r.text
    j = r.json()
    details = j["usage"].get("prompt_tokens_details") or {}
    return j["choices"][0]["text"], details.get("cached_tokens", 0)


def pytest_addoption(parser):
    parser.addoption("--pagellm", action="store", default=None, help="path of the pagellm binary")


@pytest.fixture(scope="session")
def pagellm_bin(request):
    path = (request.config.getoption("--pagellm") or os.environ.get("PAGELLM_BINARY")
            or str(ROOT / "build" / "pagellm"))
    if not os.path.isfile(path):
        pytest.fail(f"pagellm binary not found at {path} (use --pagellm=PATH)")
    return path


class Server:
    """A running `pagellm serve`; stdout and stderr are collected line by line."""

    def __init__(self, binary, args, env=None, wait_ready=True):
        self.args = [binary, "serve", "--host", "127.0.0.1", "--port", "0", *args]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, env=env)
        self.stdout_lines, self.stderr_lines = [], []
        self._listening = threading.Event()
        self.port = None
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout_lines, True),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr_lines, False),
                         daemon=True).start()
        if not self._listening.wait(START_TIMEOUT_S):
            self.stop()
            raise RuntimeError(f"server did not start: {self.output()}")
        self.url = f"http://127.0.0.1:{self.port}"
        if wait_ready:
            self.wait_ready()

    def _pump(self, stream, lines, watch):
        for line in stream:
            lines.append(line.rstrip("\n"))
            if watch and self.port is None:
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    self._listening.set()

    def output(self):
        return "\n".join(self.stdout_lines + self.stderr_lines)

    def wait_ready(self, timeout=START_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}): {self.output()}")
            try:
                if requests.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready after {timeout} s: {self.output()}")

    def wait_output(self, text, timeout=10.0):
        """Waits until a line of stdout or stderr contains `text`; returns it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.stdout_lines + self.stderr_lines:
                if text in line:
                    return line
            time.sleep(0.02)
        raise AssertionError(f"no output line contains {text!r}: {self.output()}")

    def access_log(self):
        out = []
        for line in list(self.stderr_lines):
            if line.startswith("{"):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("event") == "access":
                    out.append(entry)
        return out

    def wait_access(self, predicate, timeout=10.0):
        """Waits for an access-log entry that satisfies `predicate`; returns the last one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in self.access_log() if predicate(e)]
            if found:
                return found[-1]
            time.sleep(0.02)
        raise AssertionError(f"no such access-log entry: {self.output()}")

    def metrics(self):
        """The /metrics samples as {name or name{labels}: value}."""
        text = requests.get(self.url + "/metrics", timeout=10).text
        samples = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
        return samples

    def wait_metric(self, name, predicate, timeout=10.0):
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.metrics().get(name)
            if value is not None and predicate(value):
                return value
            time.sleep(0.05)
        raise AssertionError(f"{name} = {value} after {timeout} s")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Stops the server; returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


@pytest.fixture
def start_server(pagellm_bin):
    """Starts servers with extra arguments; stops them after the test."""
    servers = []

    def start(*args, model=STORIES, wait_ready=True, env=None):
        s = Server(pagellm_bin, ["-m", str(model), *args], env=env, wait_ready=wait_ready)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def server(pagellm_bin):
    """A server on the shipped model, shared by a module's tests."""
    s = Server(pagellm_bin, ["-m", str(STORIES), "--alias", "stories"])
    yield s
    code = s.stop()
    assert code == 0, s.output()


@pytest.fixture(scope="session")
def slow_model(pagellm_bin, tmp_path_factory):
    """A random-weight model big enough that a long completion takes seconds
    (so a test can act while it runs), with the shipped model's vocabulary."""
    path = tmp_path_factory.mktemp("models") / "slow.gguf"
    subprocess.run([pagellm_bin, "make-model", "--n-embd", "512", "--n-layer", "8", "--n-head", "8",
                    "--n-head-kv", "8", "--n-ff", "1536", "--n-ctx", "4096", "--type", "q8_0",
                    "--vocab-from", str(STORIES), "--seed", "3", "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    return path


@pytest.fixture
def client_for():
    """An openai client for a server (no retries: errors surface as they are)."""
    import openai

    def make(server, api_key="unused"):
        return openai.OpenAI(base_url=server.url + "/v1", api_key=api_key, max_retries=0,
                             timeout=120)

    return make
