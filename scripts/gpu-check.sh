#!/usr/bin/env bash
# GPU check of the CUDA backend, for a machine with an NVIDIA GPU and the CUDA
# toolkit (nvcc, cuBLAS).
#
# Covers: a build with -DPAGELLM_CUDA=ON and the CUDA backend's own tests
# (tests/backend_cuda: every kernel of src/backend/cuda against the CPU kernels
# or a double-precision reference: embedding gather, RMSNorm, RoPE, SwiGLU,
# residual add, KV write, paged attention, GEMV, cuBLAS GEMM; plus the
# host-side tests). Does NOT cover a model run or a benchmark: the engine does
# not use the CUDA backend yet.
#
# A test that reports "no CUDA device" here is a failure (the GPU is not
# visible to the CUDA runtime). The summary table is printed last.
#
# Usage: scripts/gpu-check.sh            (BUILD_DIR=build-gpu, JOBS=nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
LOG_DIR="$BUILD_DIR/gpu-check"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,memory.total \
  --format=csv,noheader || echo "nvidia-smi not found"

t0=$(date +%s)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGELLM_CUDA=ON \
  -DPAGELLM_BUILD_BENCH=OFF >/dev/null
flock /tmp/pagellm-build.lock cmake --build "$BUILD_DIR" -j "$JOBS" --target test_backend_cuda
t1=$(date +%s)

mkdir -p "$LOG_DIR"
set +e
(cd "$BUILD_DIR" && ctest -R '^Cuda' --output-on-failure --timeout 600 \
  --output-junit gpu-check/ctest.xml) 2>&1 | tee "$LOG_DIR/ctest.log"
ctest_rc=${PIPESTATUS[0]}
set -e
t2=$(date +%s)

# One row per test from ctest's progress lines: "n/N Test #k: Name ....   Passed  0.1 sec".
python3 - "$LOG_DIR/ctest.log" "$ctest_rc" "$((t1 - t0))" "$((t2 - t1))" <<'PY'
import re, sys
log, rc, build_s, test_s = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = []
for line in open(log, errors="replace"):
    m = re.search(r"Test\s+#\d+: (\S+) \.*\s*(\*\*\*)?(Passed|Failed|Skipped|Not Run|Timeout|\w+).*?([\d.]+) sec", line)
    if m:
        rows.append((m.group(1), m.group(3), m.group(4)))
skipped = [r for r in rows if r[1] == "Skipped"]
failed = [r for r in rows if r[1] not in ("Passed", "Skipped")]
print()
print("== gpu-check summary ==")
w = max([len(r[0]) for r in rows] + [4])
print(f"{'test'.ljust(w)}  {'result':8}  sec")
for name, res, sec in rows:
    print(f"{name.ljust(w)}  {res:8}  {sec}")
print(f"build {build_s}s, tests {test_s}s: {len(rows)} tests, {len(rows) - len(skipped) - len(failed)} "
      f"passed, {len(failed)} failed, {len(skipped)} skipped (skips here mean no GPU was visible)")
ok = rc == 0 and rows and not failed and not skipped
print("RESULT:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
