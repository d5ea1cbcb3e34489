#!/usr/bin/env bash
# Hybrid (Qwen3.5-shaped) decode against the memory-bandwidth roofline, and a
# 4,096-token prefill against an attention-only twin of the same shape, on
# generated models: n_embd 1024, 24 layers (every 4th gated full attention:
# 8 heads of 256, 2 KV heads; the others gated delta-net: 16 q/k and 16 v
# heads of 128, conv kernel 4), n_ff 5632, the 32k SentencePiece vocabulary;
# ~0.73B parameters.
#
#   bench/qwen35_bench.sh [TYPE]     env: THREADS (2), BENCH_DIR (/tmp/pagellm-bench)
#
# Prints `pagellm bench --roofline` for the hybrid (decode vs its ceiling,
# prefill 128/512, batched decode), then the prefill tokens/s of one
# 4,096-token prompt for the hybrid and for the twin whose every layer is
# attention (qwen3 with the same sizes), and their ratio: >= 1 means the
# delta-net layers' prefill costs no more per token than attention layers'
# at that length.
source "$(dirname "$0")/common.sh"
TYPE=${1:-q4_0}
hybrid="$DIR/qwen35-0.7b-$TYPE.gguf"
twin="$DIR/qwen3-twin-0.7b-$TYPE.gguf"
common=(--n-embd 1024 --n-layer 24 --n-head 8 --n-head-kv 2 --head-dim 256 --n-ff 5632
        --n-ctx 8192 --vocab-from "$VOCAB" --type "$TYPE" --seed 1)
[ -f "$hybrid" ] || "$BIN" make-model --arch qwen35 "${common[@]}" --full-attention-interval 4 \
  --ssm-state-size 128 --ssm-group-count 16 --ssm-v-heads 16 --ssm-conv-kernel 4 \
  -o "$hybrid" >/dev/null
[ -f "$twin" ] || "$BIN" make-model --arch qwen3 "${common[@]}" -o "$twin" >/dev/null

"$BIN" bench --roofline -m "$hybrid" -t "$THREADS"

prompt="$DIR/prompt-4096.txt"
if [ ! -f "$prompt" ]; then
  words=(once upon a time there was a little girl who lived in a village near the forest and
         every day she walked to the river to see the fish swim and the birds sing)
  : > "$prompt"
  for ((i = 0; i < 4000; i++)); do printf '%s ' "${words[i % ${#words[@]}]}" >> "$prompt"; done
fi
prefill() {  # prefill tokens/s of the prompt file on model $1 (best of 2)
  local best=0
  for _ in 1 2; do
    local v
    v=$("$BIN" generate -m "$1" -f "$prompt" -n 1 -c 8192 --max-batched-tokens 4096 \
          -t "$THREADS" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["prompt_tokens"], j["prefill_tokens_per_s"])')
    echo "  $(basename "$1"): ${v% *} prompt tokens, ${v#* } tok/s" >&2
    best=$(python3 -c "print(max($best, ${v#* }))")
  done
  echo "$best"
}
h=$(prefill "$hybrid")
a=$(prefill "$twin")
python3 -c "print(f'prefill of 4096 tokens: hybrid {$h:.1f} tok/s, attention-only twin {$a:.1f} tok/s, ratio {$h/$a:.2f}')"
