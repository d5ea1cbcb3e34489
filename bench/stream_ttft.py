"""A streamed greedy completion against a running `pagellm serve`, timed to
its first token (bench/cache_tiers.sh)."""
import json
import time
import urllib.request


def complete(base, prompt, max_tokens=8):
    """Token ids `prompt` to BASE/v1/completions, streamed: (TTFT in s, text)."""
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request(base + "/v1/completions", body,
                                 {"Content-Type": "application/json"})
    t0 = time.monotonic()
    ttft, text = None, ""
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for c in json.loads(line[6:]).get("choices", []):
                if c.get("text") and ttft is None:
                    ttft = time.monotonic() - t0
                text += c.get("text", "")
    return ttft, text
