#!/usr/bin/env bash
# Soak test of the HTTP server: builds, then runs scripts/soak.py for MINUTES
# (default 5) against `pagellm serve` on 127.0.0.1 with mixed random requests,
# aborts and bad inputs; it stops by itself and exits 1 if the server
# crashed, a request neither completed nor got a clean error, KV blocks were
# left held, or RSS kept growing. Extra arguments go to soak.py (e.g.
# --workers 16, --server-arg=--no-prefix-cache, --pagellm build-asan/pagellm).
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-5}
shift || true
scripts/setup.sh >/dev/null
python3 -c "import requests" 2>/dev/null || {
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-requests >/dev/null
}
exec python3 scripts/soak.py --minutes "$MINUTES" --pagellm "${BUILD_DIR:-build}/pagellm" "$@"
