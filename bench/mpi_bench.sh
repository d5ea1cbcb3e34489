#!/usr/bin/env bash
# Pipeline stages over MPI on this one machine: the generated 0.85B Llama-shaped
# Q4_0 model (bench/generate_bench.sh's) split over 2 ranks with 1 thread each,
# against 1 process with 2 threads; generated tok/s at concurrency 1 and 16,
# and per step how long rank 0 waited for rank 1 and how much of that was
# communication (the rest is rank 1's compute). Best of ROUNDS alternating runs.
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
for c in 1 16; do
  one=0 two=0 wait=0 comm=0
  for _ in $(seq "$ROUNDS"); do
    read -r t _ _ < <(run "$c" 2 "$BIN")
    one=$(python3 -c "print(max($one, $t))")
    read -r t w m < <(run "$c" 1 mpirun --allow-run-as-root --oversubscribe -np 2 "$BIN")
    if python3 -c "import sys; sys.exit(0 if $t > $two else 1)"; then two=$t wait=$w comm=$m; fi
  done
  python3 - "$c" "$one" "$two" "$wait" "$comm" <<'PY'
import sys
c, one, two, wait, comm = int(sys.argv[1]), *map(float, sys.argv[2:])
print(f"concurrency {c:2d}: 1 process x 2 threads {one:7.1f} tok/s | 2 ranks x 1 thread {two:7.1f} tok/s"
      f" ({two / one:4.2f}x); per step: rank 0 waits {wait:.2f} ms for rank 1, {comm:.2f} ms of it communication")
PY
done
