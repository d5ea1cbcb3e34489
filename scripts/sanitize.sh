#!/usr/bin/env bash
# Builds the project with AddressSanitizer + UndefinedBehaviorSanitizer in
# build-asan/ (RelWithDebInfo at -O1, no benchmarks) and runs the whole test
# suite there. Any sanitizer report aborts the process that made it, so the
# test that triggered it fails. Extra arguments go to ctest (e.g. -R Engine).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null  # packages (and the normal build, which CI has anyway)
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DPAGELLM_SANITIZE=ON \
    -DPAGELLM_BUILD_BENCH=OFF >/dev/null
fi
flock /tmp/pagellm-build.lock cmake --build "$BUILD_DIR" -j "$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" "$@"
