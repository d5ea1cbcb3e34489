#!/usr/bin/env bash
# Aggregate throughput of continuous batching: `pagellm bench` on a generated
# ~0.85B Q4_0 Llama (n_embd 2048, 16 layers, n_ff 5632, vocab 32000) at
# several concurrencies, with the KV waste and prefix-cache figures.
#
#   bench/engine_bench.sh [CONCURRENCY...]   env: THREADS (2), PROMPT (128), GEN (64),
#                                                 REQUESTS (2 x concurrency, at least 4), TYPE (q4_0),
#                                                 ARGS (more `pagellm bench` flags, e.g.
#                                                 "--shared-prefix 480 --max-prefill-while-decoding 0")
source "$(dirname "$0")/common.sh"
PROMPT=${PROMPT:-128}
GEN=${GEN:-64}
TYPE=${TYPE:-q4_0}
model=$(bench_model "$TYPE")
[ $# -eq 0 ] && set -- 1 4 16 64
base=""
for c in "$@"; do
  req=${REQUESTS:-$(( c * 2 > 4 ? c * 2 : 4 ))}
  out=$("$BIN" bench -m "$model" -t "$THREADS" --concurrency "$c" --requests "$req" \
        --prompt-len "$PROMPT" --gen-len "$GEN" --json ${ARGS:-})
  base=$(python3 - "$out" "$base" <<'PY'
import json, sys
j = json.loads(sys.argv[1]); base = float(sys.argv[2]) if sys.argv[2] else None
tps = j["generated_tokens_per_s"]
ratio = f"  ({tps/base:.2f}x concurrency 1)" if base else ""
print(f"concurrency {j['concurrency']:3d}: {tps:7.1f} generated tok/s{ratio}, TTFT p50 {j['ttft_p50_s']*1e3:.0f} ms,"
      f" ITL p50 {j['itl_p50_s']*1e3:.0f} ms p99 {j['itl_p99_s']*1e3:.0f} ms, KV waste {j['kv_waste_ratio']*100:.2f}%,"
      f" preemptions {j['preemptions']}", file=sys.stderr)
print(base if base else tps)
PY
)
done
