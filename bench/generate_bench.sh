#!/usr/bin/env bash
# Prefill and decode speed of `pagellm generate` on generated models shaped
# like a ~0.85B Llama (n_embd 2048, 16 layers, 32 heads, 8 KV heads, n_ff 5632,
# vocab 32000), for each weight type given (default: q4_0 q8_0).
#
#   bench/generate_bench.sh [TYPE...]     env: THREADS (2), PROMPT_TOKENS (~128), N (64)
#
# Prints one line per type, plus the weights streamed per decoded token and the
# bandwidth that implies (compare with the machine's ~25 GB/s).
source "$(dirname "$0")/common.sh"
N=${N:-64}
PROMPT="Once upon a time, in a small town near the sea, there lived a little girl named Mia. Mia had a red kite that she loved more than anything. Every morning she ran down to the beach with her kite and her dog, and they played in the wind until the sun was high. One day a strong wind came and carried the kite far away over the water. Mia was very sad, but her dog barked and ran along the shore, and together they followed the kite until it landed in a tall tree near an old lighthouse."
[ $# -eq 0 ] && set -- q4_0 q8_0
for type in "$@"; do
  model=$(bench_model "$type")
  bytes=$(stat -c %s "$model")
  out=$("$BIN" generate -m "$model" -p "$PROMPT" -n "$N" --temp 0 --ignore-eos -t "$THREADS" --json)
  python3 - "$type" "$bytes" "$out" <<'PY'
import json, sys
t, size, j = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
dec = j["decode_tokens_per_s"]
print(f"{t:6s} file {size/2**30:.2f} GiB  prompt {j['prompt_tokens']} tok: prefill {j['prefill_tokens_per_s']:.1f} tok/s"
      f"  decode {dec:.2f} tok/s (~{dec*size/1e9:.1f} GB/s of weights)  peak RSS {j['peak_rss_bytes']/2**20:.0f} MiB"
      f"  threads {j['threads']}")
PY
done
