#!/usr/bin/env bash
# MXFP4 decode against the memory-bandwidth roofline of the bytes a token
# actually reads (its 4 routed experts of 32, attention, the output layer), on
# a generated gpt-oss-shaped model stored as real gpt-oss files are: expert
# stacks in MXFP4, every other matrix Q8_0. 8 layers, n_embd 2048, 32 heads of
# 64 (4 KV heads), 32 experts of ff 2048, top-4, the 32k SentencePiece
# vocabulary; ~3.3B parameters, ~0.33B active per token (1.9 GiB).
#
#   bench/mxfp4_bench.sh [EXPERT_TYPE] [TYPE]   (mxfp4, q8_0)
#                       env: THREADS (2), BENCH_DIR (/tmp/pagellm-bench)
#
# Runs `pagellm bench --roofline` (bandwidth, decode vs its ceiling, prefill,
# batched decode). EXPERT_TYPE iq4_nl or q4_0 gives the same model at a
# comparable bit rate, for comparison.
source "$(dirname "$0")/common.sh"
EXPERT_TYPE=${1:-mxfp4}
TYPE=${2:-q8_0}
model="$DIR/gpt-oss-3.3b-$EXPERT_TYPE-$TYPE.gguf"
if [ ! -f "$model" ]; then
  "$BIN" make-model --arch gpt-oss --n-embd 2048 --n-layer 8 --n-head 32 --n-head-kv 4 \
    --head-dim 64 --n-ff 2048 --n-expert 32 --n-expert-used 4 --n-ctx 4096 \
    --vocab-from "$VOCAB" --type "$TYPE" --expert-type "$EXPERT_TYPE" --seed 1 \
    -o "$model" >/dev/null
fi
"$BIN" bench --roofline -m "$model" -t "$THREADS"
