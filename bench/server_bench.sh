#!/usr/bin/env bash
# Throughput and latency of `pagellm serve` under load: starts the server on a
# free loopback port, drives it with bench_server_load (streaming
# /v1/completions, closed loop) at each concurrency, then stops it.
#
#   bench/server_bench.sh [CONCURRENCY,...]    default 1,2,4,8,16,32,64
#   env: MODEL (tests/data/stories260K.gguf; "mid" = a generated 28 MB q8_0 model),
#        THREADS (2), PROMPT (64), GEN (64), REQUESTS (4 x concurrency, at least 8),
#        MAX_SECONDS (60 per level)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/pagellm}
LOAD=${LOAD:-build/bench/bench_server_load}
THREADS=${THREADS:-2}
MODEL=${MODEL:-tests/data/stories260K.gguf}
if [ "$MODEL" = mid ]; then
  MODEL=/tmp/pagellm-bench/mid-q8_0.gguf
  mkdir -p /tmp/pagellm-bench
  [ -f "$MODEL" ] || "$BIN" make-model --n-embd 512 --n-layer 8 --n-head 8 --n-head-kv 8 \
    --n-ff 1536 --n-ctx 4096 --type q8_0 --vocab-from tests/data/stories260K.gguf --seed 3 \
    -o "$MODEL" >/dev/null
fi
LEVELS=${1:-1,2,4,8,16,32,64}
out=$(mktemp)
"$BIN" serve -m "$MODEL" --port 0 -t "$THREADS" -c 16384 --max-queue 512 >"$out" 2>/dev/null &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 1 600); do
  grep -q "ready:" "$out" && break
  kill -0 $pid 2>/dev/null || { echo "server failed to start" >&2; exit 1; }
  sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out" | head -1)
echo "model $MODEL, $THREADS threads, prompt ${PROMPT:-64} + gen ${GEN:-64} tokens, port $port"
args=(--port "$port" --concurrency "$LEVELS" --prompt-len "${PROMPT:-64}" --gen-len "${GEN:-64}"
      --max-seconds "${MAX_SECONDS:-60}")
[ -n "${REQUESTS:-}" ] && args+=(--requests "$REQUESTS")
"$LOAD" "${args[@]}"
