#!/usr/bin/env bash
# MLA (deepseek2) decode at 4,096 tokens of context against a GQA twin of the
# same shape, on generated models: n_embd 1024, 12 layers, 16 heads, the 32k
# SentencePiece vocabulary. deepseek2: q/k heads of 128 (64 rotated), value
# heads of 128, a latent of 256 (the cache keeps 256 + 64 = 320 values per
# token and layer), layer 0 dense, then 4 experts top-2 of n_ff / 3 plus one
# shared (as many FFN rows per token as the twin). Twin: qwen3 with 16 heads of
# 128 and 4 KV heads (2 x 4 x 128 = 1,024 values per token and layer).
#
#   bench/mla_bench.sh [TYPE]     env: THREADS (2), BENCH_DIR (/tmp/pagellm-bench),
#                                 CONTEXT (4096), DECODE (32), ROUNDS (3)
#
# Prints each model's planned KV bytes per token (`pagellm plan`), then the
# decode tokens/s of DECODE tokens after a CONTEXT-token prompt, the two
# models alternating for ROUNDS rounds (so a shared machine's load falls on
# both alike), best and median of each, and the ratio MLA / GQA of the bests.
# Then the MLA model's prefill of the CONTEXT-token prompt (one chunk) in the
# absorbed form and in the plain form (model/mla_block.h; forced with
# PAGELLM_MLA_PLAIN_MIN_PROMPT), alternating ROUNDS rounds: seconds, best and
# median, and the ratio absorbed / plain (above 1: the plain form is faster).
source "$(dirname "$0")/common.sh"
TYPE=${1:-q8_0}
CONTEXT=${CONTEXT:-4096}
DECODE=${DECODE:-32}
ROUNDS=${ROUNDS:-3}
mla="$DIR/deepseek2-mla-$TYPE.gguf"
gqa="$DIR/qwen3-gqa-twin-$TYPE.gguf"
common=(--n-embd 1024 --n-layer 12 --n-head 16 --head-dim 128 --n-ff 3072 --n-ctx 8192
        --vocab-from "$VOCAB" --type "$TYPE" --seed 1)
[ -f "$mla" ] || "$BIN" make-model --arch deepseek2 "${common[@]}" --n-head-kv 1 --rope-dims 64 \
  --kv-lora-rank 256 --n-expert 4 --n-expert-used 2 --n-ff-exp 1024 -o "$mla" >/dev/null
[ -f "$gqa" ] || "$BIN" make-model --arch qwen3 "${common[@]}" --n-head-kv 4 -o "$gqa" >/dev/null

for m in "$mla" "$gqa"; do
  echo "$(basename "$m"): $("$BIN" plan -m "$m" -c 8192 | grep -E '^KV cache' | tr '\n' ' ')"
done

prompt="$DIR/prompt-mla-$CONTEXT.txt"
if [ ! -f "$prompt" ]; then
  words=(once upon a time there was a little girl who lived in a village near the forest and
         every day she walked to the river to see the fish swim and the birds sing)
  : > "$prompt"
  for ((i = 0; i < CONTEXT * 97 / 100; i++)); do printf '%s ' "${words[i % ${#words[@]}]}" >> "$prompt"; done
fi
run() {  # run MODEL TOKENS FIELD [VAR=VALUE...]: one generate after the prompt; prints
         # its prompt tokens and the JSON's FIELD
  local m=$1 n=$2 field=$3
  shift 3
  env "$@" "$BIN" generate -m "$m" -f "$prompt" -n "$n" --ignore-eos -c 8192 \
      --max-batched-tokens 4096 -t "$THREADS" --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["prompt_tokens"], j[sys.argv[1]])' "$field"
}
compare() {  # compare WHAT UNIT max|min NAME_A "VALUES" NAME_B "VALUES": best (max or min) and
             # median of each, and the ratio A / B of both
  python3 - "$@" <<'PY'
import statistics, sys
what, unit, best, na, va, nb, vb = sys.argv[1:]
a, b = [float(x) for x in va.split()], [float(x) for x in vb.split()]
pick = max if best == "max" else min
ma, mb = statistics.median(a), statistics.median(b)
print(f"{what}: {na} {pick(a):.2f} {unit} (median {ma:.2f}), {nb} {pick(b):.2f} {unit} "
      f"(median {mb:.2f}), {na} / {nb} {pick(a) / pick(b):.2f} (medians {ma / mb:.2f})")
PY
}
decode() {  # decode tokens/s after the prompt on model $1 (one run)
  local v
  v=$(run "$1" "$DECODE" decode_tokens_per_s)
  echo "  $(basename "$1"): ${v% *} prompt tokens, decode ${v#* } tok/s" >&2
  echo "${v#* }"
}
a=() b=()
for ((r = 0; r < ROUNDS; r++)); do
  a+=("$(decode "$mla")")
  b+=("$(decode "$gqa")")
done
compare "decode at $CONTEXT tokens of context" tok/s max "MLA" "${a[*]}" "GQA twin" "${b[*]}"

prefill() {  # prefill seconds of the prompt on the MLA model, prompts plain from $1 tokens
  local v
  v=$(run "$mla" 1 prefill_seconds PAGELLM_MLA_PLAIN_MIN_PROMPT="$1")
  echo "  plain from $1 tokens: ${v% *} prompt tokens, prefill ${v#* } s" >&2
  echo "${v#* }"
}
pa=() pp=()
for ((r = 0; r < ROUNDS; r++)); do
  pa+=("$(prefill 1000000000)")
  pp+=("$(prefill 0)")
done
compare "MLA prefill of $CONTEXT tokens" s min "absorbed" "${pa[*]}" "plain" "${pp[*]}"
