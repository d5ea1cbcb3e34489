#!/usr/bin/env bash
# Pipeline stages over MPI on this one machine: the generated 0.85B Llama-shaped
# Q4_0 model (bench/generate_bench.sh's) split over 2 ranks with 1 thread each,
# against 1 process with 2 threads; generated tok/s at concurrency 1 and 16,
# and per step how long rank 0 waited for rank 1 and how much of that was
# communication (the rest is rank 1's compute). At concurrency 16 also with
# each step sent in 2 parts (PAGELLM_PIPELINE_MICRO_BATCHES=2: rank 1 works on
# the first part while rank 0 runs the second). Best of ROUNDS alternating runs.
#
#   bench/mpi_bench.sh     env: ROUNDS (2), BENCH_DIR (/tmp/pagellm-bench)
source "$(dirname "$0")/common.sh"
ROUNDS=${ROUNDS:-2}
model=$(bench_model q4_0)
command -v mpirun >/dev/null || { echo "mpirun is missing (scripts/setup.sh installs openmpi-bin)"; exit 1; }
run() {  # concurrency, threads, launcher...
  local c=$1 t=$2; shift 2
  "$@" bench -m "$model" -t "$t" --concurrency "$c" --requests $((c * 2)) --prompt-len 64 \
    --gen-len 64 --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
steps = max(j["pipeline_steps"], 1)
print(j["generated_tokens_per_s"], 1e3 * j["pipeline_wait_s"] / steps,
      1e3 * (j["pipeline_wait_s"] - j["pipeline_remote_compute_s"]) / steps)'
}
mpi=(mpirun --allow-run-as-root --oversubscribe -x PAGELLM_PIPELINE_MICRO_BATCHES -np 2 "$BIN")
for c in 1 16; do
  one=0 two=0 wait=0 comm=0 parts=0
  for _ in $(seq "$ROUNDS"); do
    read -r t _ _ < <(run "$c" 2 "$BIN")
    one=$(python3 -c "print(max($one, $t))")
    read -r t w m < <(PAGELLM_PIPELINE_MICRO_BATCHES=1 run "$c" 1 "${mpi[@]}")
    if python3 -c "import sys; sys.exit(0 if $t > $two else 1)"; then two=$t wait=$w comm=$m; fi
    if [ "$c" -gt 1 ]; then
      read -r t _ _ < <(PAGELLM_PIPELINE_MICRO_BATCHES=2 run "$c" 1 "${mpi[@]}")
      parts=$(python3 -c "print(max($parts, $t))")
    fi
  done
  python3 - "$c" "$one" "$two" "$wait" "$comm" "$parts" <<'PY'
import sys
c, one, two, wait, comm, parts = int(sys.argv[1]), *map(float, sys.argv[2:])
print(f"concurrency {c:2d}: 1 process x 2 threads {one:7.1f} tok/s | 2 ranks x 1 thread {two:7.1f} tok/s"
      f" ({two / one:4.2f}x); per step: rank 0 waits {wait:.2f} ms for rank 1, {comm:.2f} ms of it communication")
if parts:
    print(f"               steps in 2 parts: {parts:7.1f} tok/s ({parts / one:4.2f}x of 1 process, "
          f"{parts / two:4.2f}x of whole steps)")
PY
done
