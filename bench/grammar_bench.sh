#!/usr/bin/env bash
# Decode speed with and without a JSON Schema constraint on the generated
# 0.85B Llama-shaped model (bench/generate_bench.sh's), greedy, batch 1 and
# batch 16: the cost of token masking.
#
#   bench/grammar_bench.sh [TYPE]     env: THREADS (2), BENCH_DIR (/tmp/pagellm-bench)
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
run() {  # concurrency, extra flags
  "$BIN" bench -m "$model" -t "$THREADS" --concurrency "$1" --requests "$1" --prompt-len 32 \
    --gen-len 64 --json "${@:2}" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["generated_tokens_per_s"])'
}
for c in 1 16; do
  free=$(run "$c")
  constrained=$(run "$c" --json-schema "$schema")
  python3 - "$c" "$free" "$constrained" <<'PY'
import sys
c, free, con = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"batch {c:2d}: free {free:.2f} tok/s, json_schema {con:.2f} tok/s, overhead {100 * (1 - con / free):.1f}%")
PY
done
