#!/usr/bin/env bash
# Mixture-of-experts decode against the memory-bandwidth roofline of the bytes
# a token actually reads (its routed experts only), and prefill, on a generated
# Mixtral-shaped model of ~2.4B parameters with ~0.55B active per token:
# 16 layers, n_embd 2048, 16 heads (4 KV heads), 16 experts of ff 1408, top-2,
# the 32k SentencePiece vocabulary; Q4_0 (1.32 GiB).
#
#   bench/moe_bench.sh [TYPE]     env: THREADS (2), BENCH_DIR (/tmp/pagellm-bench)
#
# Runs `pagellm bench --roofline` (one run: bandwidth, decode vs its ceiling,
# prefill, batched decode) and, with two virtual devices, `pagellm plan`.
source "$(dirname "$0")/common.sh"
TYPE=${1:-q4_0}
model="$DIR/moe-2.4b-$TYPE.gguf"
if [ ! -f "$model" ]; then
  "$BIN" make-model --arch mixtral --n-embd 2048 --n-layer 16 --n-head 16 --n-head-kv 4 \
    --n-ff 1408 --n-expert 16 --n-expert-used 2 --n-ctx 4096 --vocab-from "$VOCAB" \
    --type "$TYPE" --seed 1 -o "$model" >/dev/null
fi
"$BIN" bench --roofline -m "$model" -t "$THREADS"
"$BIN" plan -m "$model" --device cpu:0=700MiB --device cpu:1=400MiB -c 4096
