#!/usr/bin/env bash
# Packs the large test data (golden reference models and outputs, tokenizer
# vocabularies) into tests/data/packed.tar.xz, the form the repository keeps
# them in: ~90 MB of files become ~35 MB, so the working tree stays small
# enough to travel (the GPU machine takes at most 64 MiB). CMake unpacks the
# archive beside it at configure time (cmake/unpack_test_data.cmake); the
# unpacked files are git-ignored. Run this after changing any of them, and
# commit the archive. Deterministic: the same files give the same bytes.
set -euo pipefail
cd "$(dirname "$0")/../tests/data"
# The packed files: keep in step with .gitignore.
files=$(ls golden/*.json golden/random/*.gguf golden/random/*.json golden/arch/*.gguf golden/arch/*.json \
  tokenizer-vectors/*.gguf)
printf '%s\n' $files | LC_ALL=C sort |
  tar --owner=0 --group=0 --numeric-owner --mode=u=rw,go=r --mtime='2026-01-01 00:00:00Z' \
    --format=gnu \
    -cf - -T - | xz -9e -T1 >packed.tar.xz.tmp
mv packed.tar.xz.tmp packed.tar.xz
ls -l packed.tar.xz
