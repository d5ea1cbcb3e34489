#!/usr/bin/env bash
# Decode speed with and without a JSON Schema constraint on the generated
# 0.85B Llama-shaped model (bench/generate_bench.sh's), greedy, batch 1 and
# batch 16: the cost of token masking. Free and constrained runs alternate,
# ROUNDS times; the overhead is that of the medians (min and max of the
# per-round ratios beside it). The cache holds every sequence at once (-c),
# so batch 16 decodes 16 sequences per step.
#
#   bench/grammar_bench.sh [TYPE]     env: THREADS (2), BENCH_DIR (/tmp/pagellm-bench), ROUNDS (3),
#                                          ARGS (more `pagellm bench` flags, e.g. --profile)
source "$(dirname "$0")/common.sh"
TYPE=${1:-q4_0}
model=$(bench_model "$TYPE")
# An array of records with no upper bound, so that every reply runs to --gen-len.
schema="$DIR/records.schema.json"
cat >"$schema" <<'JSON'
{"type": "array", "items": {"type": "object", "properties": {
  "id": {"type": "integer", "minimum": 0, "maximum": 99999},
  "name": {"type": "string", "maxLength": 24},
  "kind": {"enum": ["alpha", "beta", "gamma"]},
  "score": {"type": "number"},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
  "required": ["id", "name", "kind", "score", "tags"], "additionalProperties": false}}
JSON
ROUNDS=${ROUNDS:-3}
run() {  # concurrency, extra flags
  "$BIN" bench -m "$model" -t "$THREADS" --concurrency "$1" --requests "$1" --prompt-len 32 \
    --gen-len 64 -c $(( $1 * 96 )) --json ${ARGS:-} "${@:2}" |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["generated_tokens_per_s"])'
}
for c in 1 16; do
  free=() constrained=()
  for ((r = 0; r < ROUNDS; r++)); do
    free+=("$(run "$c")")
    constrained+=("$(run "$c" --json-schema "$schema")")
  done
  python3 - "$c" "${free[*]}" "${constrained[*]}" <<'PY'
import statistics, sys
c = int(sys.argv[1])
free = [float(x) for x in sys.argv[2].split()]
con = [float(x) for x in sys.argv[3].split()]
f, k = statistics.median(free), statistics.median(con)
ratios = [100 * (1 - b / a) for a, b in zip(free, con)]
print(f"batch {c:2d}: free {f:.2f} tok/s, json_schema {k:.2f} tok/s (medians of {len(free)}), "
      f"overhead {100 * (1 - k / f):.1f}% (rounds {min(ratios):.1f}% to {max(ratios):.1f}%)")
PY
done
