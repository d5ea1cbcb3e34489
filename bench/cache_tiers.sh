#!/usr/bin/env bash
# The prefix cache's tiers (issue 54):
# 1. host tier: on one `pagellm serve --cache-host` with a pool of HOST_POOL
#    tokens, a HOST_TOKENS-token prompt cold, then another prompt as long that
#    evicts its blocks from the pool, then the first prompt again (restored
#    from the host tier): TTFT cold vs host hit over ROUNDS rounds (min and
#    median of the ratios), the same tokens, and the hits in /metrics;
# 2. disk tier across a restart: time to first token of one long prompt on a
#    cold server, then on a restarted one with the same --cache-dir (its
#    blocks read back from disk), and whether both give the same tokens.
#
#   bench/cache_tiers.sh            env: MODEL (SmolLM2-135M-Instruct Q4_1 from
#        scripts/fetch-real-models.sh), TOKENS (4000), HOST_TOKENS (2000),
#        HOST_POOL (2304), ROUNDS (3), THREADS (2)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/pagellm}
THREADS=${THREADS:-2}
TOKENS=${TOKENS:-4000}
HOST_TOKENS=${HOST_TOKENS:-2000}
HOST_POOL=${HOST_POOL:-2304}
ROUNDS=${ROUNDS:-3}
MODEL=${MODEL:-${PAGELLM_MODEL_CACHE:-$HOME/.cache/pagellm/models}/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$MODEL" ] || scripts/fetch-real-models.sh >/dev/null 2>&1 || true
[ -f "$MODEL" ] || { echo "cache_tiers: $MODEL is missing (scripts/fetch-real-models.sh)" >&2; exit 1; }
dir=$(mktemp -d)
out=$(mktemp)
pid=
stop() { [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; pid=; }
trap 'stop; rm -rf "$dir" "$out"' EXIT

# start_server ARGS...: a server in the background ($pid), its port in $port.
start_server() {
  "$BIN" serve -m "$MODEL" --port 0 -t "$THREADS" --max-num-seqs 1 "$@" >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q "ready:" "$out" && break
    kill -0 "$pid" 2>/dev/null || { cat "$out" >&2; exit 1; }
    sleep 0.1
  done
  port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$out" | head -1)
}

# serve_once LABEL: starts a server on the cache dir, times one request, stops it.
serve_once() {
  start_server --cache-dir "$dir/cache"
  python3 - "$port" "$TOKENS" "$1" "$dir/tokens-$1" <<'PY'
import json, random, sys
sys.path.insert(0, "bench")
from stream_ttft import complete
port, n, label, save = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = random.Random(1)
prompt = [rng.randrange(100, 40000) for _ in range(n)]
ttft, text = complete(f"http://127.0.0.1:{port}", prompt)
open(save, "w").write(json.dumps({"ttft": ttft, "text": text}))
print(f"{label}: TTFT {ttft:.3f} s for a {n}-token prompt")
PY
  stop
}

# 1. The host tier.
start_server -c "$HOST_POOL" --cache-host 256MiB
python3 - "$port" "$HOST_TOKENS" "$ROUNDS" <<'PY'
import random, statistics, sys, urllib.request
sys.path.insert(0, "bench")
from stream_ttft import complete
port, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
base = f"http://127.0.0.1:{port}"


def host_hits():
    with urllib.request.urlopen(base + "/metrics", timeout=60) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("pagellm_host_tier_hits_total"):
                return float(line.split()[-1])
    return None

ratios, same = [], True
for k in range(rounds):
    rng = random.Random(100 + k)
    prompt = [rng.randrange(100, 40000) for _ in range(n)]
    flood = [rng.randrange(100, 40000) for _ in range(n)]
    before = host_hits()
    cold, text_cold = complete(base, prompt)
    complete(base, flood)  # evicts the prompt's blocks from the pool into the host tier
    hit, text_hit = complete(base, prompt)
    hits = host_hits() - before
    ratios.append(cold / hit)
    same &= text_cold == text_hit
    print(f"round {k + 1}: {n}-token prompt: TTFT cold {cold:.3f} s, after eviction from the pool "
          f"{hit:.3f} s ({cold / hit:.1f}x), {hits:.0f} host-tier hits in /metrics, "
          f"{'same tokens' if text_cold == text_hit else 'DIFFERENT TOKENS'}")
print(f"host tier: TTFT {min(ratios):.1f}x (min) / {statistics.median(ratios):.1f}x (median) lower "
      f"than cold over {rounds} rounds, {'same tokens' if same else 'DIFFERENT TOKENS'}")
PY
stop

# 2. The disk tier across a restart.
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
