#!/usr/bin/env bash
# Sets up, builds and runs `pagellm generate` on the model shipped in the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
if [ $# -eq 0 ]; then set -- -p "Once upon a time" -n 64; fi
exec "$BUILD_DIR/pagellm" generate "$@"
