#!/usr/bin/env bash
# Speculative decoding: decode tok/s with and without it, 2 threads, greedy.
#   (a) text that repeats or edits its prompt: a code-editing request, where
#       prompt lookup finds what comes next. Random weights never copy their
#       prompt, so (a) runs on SmolLM2-135M-Instruct (a real model, fetched
#       by scripts/fetch-real-models.sh) and, for the record, on the 0.85B.
#   (b) free text on the generated 0.85B Llama-shaped Q4_0 model
#       (bench/generate_bench.sh's), batch 1, and a concurrency-16 load.
#   Draft model: the 0.85B as target with a small generated model of the same
#       vocabulary as the draft (random weights: its acceptance is honest, not
#       good).
# Every pair also checks that the tokens are the same with and without.
# Each pair runs alternately ROUNDS times (default 3); the best of each side
# is compared (this machine is shared and noisy). The last line is the
# acceptance figure: the SmolLM2 code edit's speedup.
#
#   bench/spec_bench.sh     env: THREADS (2), ROUNDS (3), NGRAM (3), DRAFT_MAX (8), BENCH_DIR
source "$(dirname "$0")/common.sh"
ROUNDS=${ROUNDS:-3}
NGRAM=${NGRAM:-3}
DRAFT_MAX=${DRAFT_MAX:-8}
big=$(bench_model q4_0)
draft="$DIR/llama-draft-40m-q4_0.gguf"
[ -f "$draft" ] || "$BIN" make-model --arch llama --n-embd 256 --n-layer 4 --n-head 4 \
  --n-head-kv 4 --n-ff 768 --n-ctx 4096 --vocab-from "$VOCAB" --type q4_0 --seed 2 -o "$draft" >/dev/null
scripts/fetch-real-models.sh >/dev/null 2>&1 || true
smol=${PAGELLM_MODEL_CACHE:-$HOME/.cache/pagellm/models}/SmolLM2-135M-Instruct.Q4_1.gguf

edit="$DIR/edit_prompt.txt"
cat >"$edit" <<'TXT'
<|im_start|>user
Add a docstring to every function in this code and return the whole file.

```python
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    result = 0
    for _ in range(b):
        result = add(result, a)
    return result


def area(width, height):
    return mul(width, height)
```<|im_end|>
<|im_start|>assistant
TXT
story="Once upon a time, in a small town near the sea, there lived a little girl named Mia. Mia had a red kite that she loved more than anything."

gen() {  # model, prompt flags..., then speculation flags: prints "tok/s proposed accepted ids-hash"
  "$BIN" generate -t "$THREADS" -n 160 --temp 0 --json "$@" 2>/dev/null |
    python3 -c 'import json,sys,hashlib; j=json.load(sys.stdin); print(j["decode_tokens_per_s"], j["spec_proposed"], j["spec_accepted"], hashlib.sha1(str(j["output_ids"]).encode()).hexdigest()[:12])'
}
load() {  # model, speculation flags...: prints "tok/s proposed accepted output-hash"
  "$BIN" bench -m "$1" -t "$THREADS" --concurrency 16 --requests 32 --prompt-len 64 --gen-len 64 \
    --json "${@:2}" 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["generated_tokens_per_s"], j["spec_proposed"], j["spec_accepted"], j["output_hash"])'
}
tight() {  # 8 requests, 4 at a time, in a 512-token cache: preemption (3 with these lengths)
  "$BIN" bench -m "$1" -t "$THREADS" --concurrency 4 --requests 8 --prompt-len 160 --gen-len 96 \
    --kv-tokens 512 --max-seq-len 256 --max-num-seqs 4 --json "${@:2}" 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["preemptions"] > 0; print(j["generated_tokens_per_s"], j["spec_proposed"], j["spec_accepted"], j["output_hash"])'
}
compare() {  # label, runner, args... (the speculation flags come from $SPEC)
  local label=$1 runner=$2; shift 2
  local off=0 on=0 p=0 a=0 h0 h1
  for _ in $(seq "$ROUNDS"); do
    read -r t _ _ h0 < <($runner "$@")
    off=$(python3 -c "print(max($off, $t))")
    read -r t p a h1 < <($runner "$@" $SPEC)
    on=$(python3 -c "print(max($on, $t))")
    # Greedy output with speculation must be the output without, token for token.
    [ "$h0" = "$h1" ] || { echo "$label: the tokens differ with speculation ($h0 vs $h1)"; exit 1; }
  done
  python3 - "$label" "$off" "$on" "$p" "$a" <<'PY'
import sys
label, off, on, p, a = sys.argv[1], *map(float, sys.argv[2:])
acc = f"{a:.0f}/{p:.0f} drafts accepted ({100 * a / p:.0f}%)" if p else "no drafts"
print(f"{label:58s} {off:7.1f} -> {on:7.1f} tok/s  {on / off:5.2f}x  {acc}")
PY
  last_ratio=$(python3 -c "print(f'{$on / $off:.2f}')")
}

echo "THREADS=$THREADS ROUNDS=$ROUNDS; prompt lookup --spec-ngram $NGRAM --draft-max $DRAFT_MAX"
SPEC="--spec-ngram $NGRAM --draft-max $DRAFT_MAX"
if [ -f "$smol" ]; then
  compare "(a) SmolLM2-135M Q4_1, code edit, batch 1" gen -m "$smol" -f "$edit" --parse-special
  smol_ratio=$last_ratio
else
  echo "(a) SmolLM2: skipped, $smol is missing (scripts/fetch-real-models.sh)"
fi
compare "(a) 0.85B Q4_0 (random weights), code edit, batch 1" gen -m "$big" -f "$edit" --parse-special
compare "(b) 0.85B Q4_0, free text, batch 1" gen -m "$big" -p "$story" --ignore-eos
compare "(b) 0.85B Q4_0, concurrency 16 (random prompts)" load "$big"
SPEC="--draft-model $draft --draft-max 4"
echo "draft model $draft (4 layers x 256, same vocabulary) --draft-max 4"
compare "    0.85B Q4_0 target, free text, batch 1" gen -m "$big" -p "$story" --ignore-eos
SPEC="--spec-ngram 1 --draft-max 4"
echo "under preemption, unigram lookup (drafts often, most rejected): the same tokens"
compare "    0.85B Q4_0, 4 at a time in a 512-token cache" tight "$big"
# Issue 55's acceptance: >= 1.5x on (a) SmolLM2 on a quiet machine, the same tokens.
if [ -n "${smol_ratio:-}" ]; then
  echo "acceptance: SmolLM2 code edit speedup ${smol_ratio}x with the same tokens (target >= 1.5x on a quiet machine)"
fi
