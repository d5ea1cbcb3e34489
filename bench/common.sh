# Sourced by the bench scripts: strict mode, the repository root, the binary
# (BIN), threads (THREADS, default 2), the models' folder (BENCH_DIR, default
# /tmp/pagellm-bench), and the generated 0.85B Llama-shaped model
# (n_embd 2048, 16 layers, 32 heads, 8 KV heads, n_ff 5632, a 32000-token SPM
# vocabulary) that most benchmarks run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=${BIN:-build/pagellm}
THREADS=${THREADS:-2}
DIR=${BENCH_DIR:-/tmp/pagellm-bench}
mkdir -p "$DIR"
VOCAB=tests/data/golden/random/rand-llama-spm32k-Q4_0.gguf

# bench_model TYPE: prints the path of the 0.85B model of weight TYPE, made once.
bench_model() {
  local model="$DIR/llama-0.85b-$1.gguf"
  [ -f "$model" ] || "$BIN" make-model --arch llama --n-embd 2048 --n-layer 16 --n-head 32 \
    --n-head-kv 8 --n-ff 5632 --n-ctx 4096 --vocab-from "$VOCAB" --type "$1" --seed 1 \
    -o "$model" >/dev/null
  echo "$model"
}
