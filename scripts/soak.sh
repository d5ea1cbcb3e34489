#!/usr/bin/env bash
# Soak test of the HTTP server: builds, then runs scripts/soak.py for MINUTES
# (default 5) against `pagellm serve` on 127.0.0.1 with a short queue, a small
# KV cache and --spec-ngram 3, under mixed random traffic: plain, constrained
# (json_schema, grammar) and repetitive requests, streams cut off mid-way,
# connections closed before the answer, bad inputs. It stops by itself, prints
# the count of each path (503 + Retry-After, preemptions, aborts, speculation,
# ...) and exits 1 if the server crashed, a request neither completed, was
# aborted nor was refused cleanly (4xx/503), a path was not taken, KV blocks
# were left held, or RSS did not come back within 10 % of its warm value.
# Extra arguments go to soak.py (e.g. --workers 32, --kv-tokens 512,
# --server-arg=--no-prefix-cache, --pagellm build-asan/pagellm). CI
# (.ci/run) runs it for 1 minute.
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
