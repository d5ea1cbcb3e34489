#!/usr/bin/env bash
# The prefix cache's disk tier across a restart (issue 54): time to first
# token of one long prompt on a cold `pagellm serve`, then on a restarted one
# with the same --cache-dir (its blocks read back from disk), and whether both
# give the same tokens.
#
#   bench/cache_tiers.sh            env: MODEL (SmolLM2-135M-Instruct Q4_1 from
#        scripts/fetch-real-models.sh), TOKENS (4000), THREADS (2)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/pagellm}
THREADS=${THREADS:-2}
TOKENS=${TOKENS:-4000}
MODEL=${MODEL:-${PAGELLM_MODEL_CACHE:-$HOME/.cache/pagellm/models}/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$MODEL" ] || scripts/fetch-real-models.sh >/dev/null 2>&1 || true
[ -f "$MODEL" ] || { echo "cache_tiers: $MODEL is missing (scripts/fetch-real-models.sh)" >&2; exit 1; }
dir=$(mktemp -d)
out=$(mktemp)
pid=
stop() { [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; pid=; }
trap 'stop; rm -rf "$dir" "$out"' EXIT

# serve_once LABEL: starts a server on the cache dir, times one request, stops it.
serve_once() {
  "$BIN" serve -m "$MODEL" --port 0 -t "$THREADS" --max-num-seqs 1 --cache-dir "$dir/cache" \
    >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q "ready:" "$out" && break
    kill -0 "$pid" 2>/dev/null || { cat "$out" >&2; exit 1; }
    sleep 0.1
  done
  local port
  port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$out" | head -1)
  python3 - "$port" "$TOKENS" "$1" "$dir/tokens-$1" <<'PY'
import json, random, sys, time, urllib.request
port, n, label, save = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = random.Random(1)
prompt = [rng.randrange(100, 40000) for _ in range(n)]
body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 8, "temperature": 0,
                   "stream": True}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                             {"Content-Type": "application/json"})
t0 = time.monotonic()
ttft, text = None, ""
with urllib.request.urlopen(req, timeout=3600) as r:
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for c in chunk.get("choices", []):
            if c.get("text") and ttft is None:
                ttft = time.monotonic() - t0
            text += c.get("text", "")
open(save, "w").write(json.dumps({"ttft": ttft, "text": text}))
print(f"{label}: TTFT {ttft:.3f} s for a {n}-token prompt")
PY
  stop
}

serve_once cold
serve_once restarted
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
cold = json.load(open(f"{d}/tokens-cold"))
warm = json.load(open(f"{d}/tokens-restarted"))
same = "same tokens" if cold["text"] == warm["text"] else "DIFFERENT TOKENS"
print(f"restart with the same --cache-dir: {cold['ttft'] / warm['ttft']:.1f}x faster to the first token, {same}")
PY
du -sh "$dir/cache" | sed 's/^/cache dir: /'
