#!/usr/bin/env bash
# GPU check of the CUDA backend, for a machine with an NVIDIA GPU and the CUDA
# toolkit (nvcc, cuBLAS). One prepared run, a few minutes on an H200:
#
# 1. a build with -DPAGELLM_CUDA=ON for this GPU's architecture;
# 2. the GPU tests: every kernel of src/backend/cuda against the CPU kernels
#    or a double-precision reference (tests/backend_cuda), and the engine on
#    the GPU (tests/engine/cuda_engine_test.cpp): whole forward passes against
#    the CPU's logits, greedy tokens equal to the CPU run on one GPU, on the
#    GPU split into two virtual devices, and shared with the host; the
#    issue-56 families (gpt-oss, deepseek2, gemma4: CudaEngine.*GivesTheCpuTokens,
#    read from ../shared/golden/arch2026, skipped when it is absent);
# 3. a benchmark on a generated 8B-shape Q4_0 model (n_embd 4096, 32 layers,
#    32 heads / 8 KV heads, n_ff 14336, vocab 32000): the plan, then
#    `pagellm bench --roofline`: the GPU's measured read bandwidth, decode
#    tokens/s at batch 1 and its fraction of that bandwidth and of the nominal
#    HBM bandwidth (PEAK_GBPS, by default the GPU model's data-sheet figure),
#    prefill 128 / 512, and decode at 1 / 4 / 16 / 64 sequences; then batch-1
#    decode (median inter-token latency) as built, without dependent launches
#    (PAGELLM_CUDA_PDL=0), without CUDA graphs (PAGELLM_CUDA_GRAPHS=0), and
#    with the f32 GEMV too (PAGELLM_CUDA_GEMV=f32);
#    and decode at 64 sequences (median inter-token latency x 64) as built and
#    with cuBLAS instead of the int8 tensor-core product (PAGELLM_CUDA_MMQ=0);
#    and the GPU time per backend operation at 1 and 64 sequences
#    (PAGELLM_CUDA_PROFILE=1: which kernels a step's time goes to);
# 4. each matrix-product kernel alone (bench/bench_cuda_kernels.cpp): time per
#    launch and fraction of the measured read bandwidth, on an 8B layer's
#    shapes (the table before the summary);
# 5. on the way, the host CPU's AMX int8 kernels: the Rows16 matmul tests,
#    which run them on the CPU's tiles where it has AMX-INT8 (GPU hosts often
#    do; the development machines do not).
#
# A test that reports "no CUDA device" here is a failure (the GPU is not
# visible to the CUDA runtime). The summary table is printed last.
#
# Step 1 is skipped when .gpu-bundle/bundle.tar.xz (scripts/gpu-bundle.sh,
# built on a development machine and carried along) holds binaries for this
# GPU that run here: no compiling on the GPU machine, and no -dev packages
# needed there. GPU_CHECK_BUILD=1 builds anyway.
#
# Usage: scripts/gpu-check.sh   (BUILD_DIR=build-gpu, JOBS=nproc, SKIP_BENCH=1,
#                                 PEAK_GBPS=..., GPU_CHECK_BUILD=1)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
LOG_DIR="$BUILD_DIR/gpu-check"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,memory.total \
  --format=csv,noheader || echo "nvidia-smi not found"

t0=$(date +%s)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
# A bundle prebuilt elsewhere (scripts/gpu-bundle.sh, carried as .gpu-bundle)
# for this GPU's architecture, when its binaries run here; else a build here.
prebuilt=""
if [ -f .gpu-bundle/bundle.tar.xz ] && [ "$BUILD_DIR" = build-gpu ] && [ -z "${GPU_CHECK_BUILD:-}" ]; then
  ln -sfn "$PWD" /tmp/pagellm-src  # the bundle's compiled-in paths start there
  cmake -E tar xf .gpu-bundle/bundle.tar.xz  # over build-gpu: a generated model stays
  (cd tests/data && cmake -E tar xf packed.tar.xz)  # what configuring would unpack
  why=""
  if [ "$(cat build-gpu/bundle-lib/cuda-arch)" != "${arch:-?}" ]; then
    why="built for sm_$(cat build-gpu/bundle-lib/cuda-arch), this GPU is sm_${arch:-?}"
  elif ! sha256sum --quiet -c build-gpu/bundle-lib/sources.sha256 >.gpu-bundle/stale.txt 2>&1; then
    why="built from other sources: $(grep -c FAILED .gpu-bundle/stale.txt) files differ"
  elif ! build-gpu/pagellm plan -m tests/data/stories260K.gguf --json >.gpu-bundle/plan.json \
    2>.gpu-bundle/run.err || ! grep -q '"name": *"cuda' .gpu-bundle/plan.json; then
    why="it sees no CUDA device here: $(head -c 300 .gpu-bundle/run.err)"
  fi
  if [ -z "$why" ]; then
    prebuilt=yes
    echo "gpu-check: prebuilt bundle (sm_$arch)"
  else
    echo "gpu-check: not using the bundle ($why): building here"
    rm -rf build-gpu
  fi
fi
if [ -z "$prebuilt" ]; then
  # Only this GPU's architecture: a quicker build than the default four.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGELLM_CUDA=ON \
    -DPAGELLM_BUILD_BENCH=ON ${arch:+-DCMAKE_CUDA_ARCHITECTURES=$arch} >/dev/null
  flock /tmp/pagellm-build.lock cmake --build "$BUILD_DIR" -j "$JOBS" \
    --target pagellm test_backend_cuda test_engine test_backend bench_cuda_kernels
fi
t1=$(date +%s)

mkdir -p "$LOG_DIR"
set +e
(cd "$BUILD_DIR" && ctest -R '^Cuda' --output-on-failure --timeout 600 \
  --output-junit gpu-check/ctest.xml) 2>&1 | tee "$LOG_DIR/ctest.log"
ctest_rc=${PIPESTATUS[0]}
# The CPU's AMX kernels (skipped by name where the CPU has no AMX-INT8).
"$BUILD_DIR/tests/test_backend" --gtest_filter='PackedMatmul.*:AmxModel.*' 2>&1 |
  tee "$LOG_DIR/amx.log" | tail -4
amx_rc=${PIPESTATUS[0]}
# Each matrix-product kernel against the measured read bandwidth.
"$BUILD_DIR/bench/bench_cuda_kernels" --benchmark_min_time=0.05 --benchmark_format=json \
  >"$LOG_DIR/kernels.json" 2>"$LOG_DIR/kernels.err" || echo "bench_cuda_kernels failed"
set -e
t2=$(date +%s)


# The benchmark: an 8B-shape Q4_0 model with random weights.
bench_json="$LOG_DIR/bench.json"
echo '{}' >"$bench_json"
if [ -z "${SKIP_BENCH:-}" ]; then
  model="$LOG_DIR/llama-8b-q4_0.gguf"
  [ -f "$model" ] || "$BUILD_DIR/pagellm" make-model --arch llama --n-embd 4096 --n-layer 32 \
    --n-head 32 --n-head-kv 8 --n-ff 14336 --n-ctx 4096 --type q4_0 --seed 1 -t "$JOBS" \
    --vocab-from tests/data/golden/random/rand-llama-spm32k-Q4_0.gguf -o "$model"
  set +e
  "$BUILD_DIR/pagellm" plan -m "$model" --max-seq-len 1024 --max-num-seqs 64 | tee "$LOG_DIR/plan.txt"
  "$BUILD_DIR/pagellm" plan -m "$model" --max-seq-len 1024 --max-num-seqs 64 --json >"$LOG_DIR/plan.json"
  # Decode at batch 1 against the GPU's measured read bandwidth, prefill 128 /
  # 512, and decode at 1 / 4 / 16 / 64 sequences, in one run.
  "$BUILD_DIR/pagellm" bench --roofline -m "$model" --json >"$LOG_DIR/roofline.json"
  # What the decode pieces bring, batch 1: as built (int8 GEMV, CUDA graphs),
  # without graphs, and without either (f32 GEMV, a launch per kernel).
  for v in default:PAGELLM_CUDA_GRAPHS=1 nopdl:PAGELLM_CUDA_PDL=0 nographs:PAGELLM_CUDA_GRAPHS=0 \
    f32gemv:PAGELLM_CUDA_GRAPHS=0,PAGELLM_CUDA_GEMV=f32; do
    name=${v%%:*}
    env $(echo "${v#*:}" | tr , ' ') "$BUILD_DIR/pagellm" bench -m "$model" --concurrency 1 \
      --requests 1 --prompt-len 32 --gen-len 256 --json >"$LOG_DIR/ablation_$name.json"
  done
  # Where a step's time goes: GPU time per backend operation (unrecorded
  # steps), at 1 and at 64 sequences.
  for c in 1 64; do
    PAGELLM_CUDA_PROFILE=1 "$BUILD_DIR/pagellm" bench -m "$model" --concurrency $c --requests $c \
      --prompt-len 32 --gen-len 64 --json >/dev/null 2>"$LOG_DIR/profile_c$c.txt"
  done
  # What the int8 tensor-core product brings at 64 sequences.
  for v in c64:PAGELLM_CUDA_MMQ=1 c64nommq:PAGELLM_CUDA_MMQ=0; do
    name=${v%%:*}
    env "${v#*:}" "$BUILD_DIR/pagellm" bench -m "$model" --concurrency 64 --requests 64 \
      --prompt-len 32 --gen-len 64 --json >"$LOG_DIR/ablation_$name.json"
  done
  set -e
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  python3 - "$LOG_DIR" "$gpu_name" "${PEAK_GBPS:-}" >"$bench_json" <<'PY'
import json, os, sys
d, gpu, peak = sys.argv[1], sys.argv[2], sys.argv[3]
def load(name):
    try:
        return json.load(open(os.path.join(d, name)))
    except Exception:  # a failed run: reported as missing
        return {}
nominal = {"H200": 4800, "H100 SXM": 3350, "H100 NVL": 3900, "H100 PCIe": 2000, "H100": 3350,
           "A100-SXM4-80GB": 2039, "A100 80GB PCIe": 1935, "A100": 1555, "L40S": 864, "L4": 300}
if not peak:
    peak = next((v for k, v in nominal.items() if k in gpu), 0)
peak = float(peak or 0)
plan, roof = load("plan.json"), load("roofline.json")
gpus = [x for x in plan.get("devices", []) if x.get("name", "").startswith("cuda")]
out = {"gpu": gpu, "gpu_layers": sum(x["last_layer"] - x["first_layer"] + 1 for x in gpus
                                     if x.get("first_layer", -1) >= 0),
       "host_layers": sum(x["last_layer"] - x["first_layer"] + 1 for x in plan.get("devices", [])
                          if x.get("name") == "host" and x.get("first_layer", -1) >= 0)}
if roof:
    out["weight_bytes_per_token"] = roof["weight_bytes_per_token"]
    for dev in roof.get("devices", []):
        if dev.get("own_memory"):
            out[f"{dev['device']}_read_gbps"] = dev["read_bandwidth_bytes_per_s"] / 1e9
    out["decode_tok_s"] = roof["decode_tokens_per_s"]
    out["decode_gbps"] = roof["decode_tokens_per_s"] * roof["weight_bytes_per_token"] / 1e9
    out["fraction_of_measured_bw"] = roof["decode_fraction_of_ceiling"]
    if peak:
        out["nominal_peak_gbps"] = peak
        out["roofline_fraction"] = out["decode_gbps"] / peak
    for p in roof.get("prefill", []):
        out[f"prefill_{p['prompt_len']}_tok_s"] = p["tokens_per_s"]
    bat = {b["concurrency"]: b["decode_tokens_per_s"] for b in roof.get("batched", [])}
    for c, v in sorted(bat.items()):
        out[f"c{c}_decode_tok_s"] = v
    if bat.get(1) and bat.get(64):
        out["c64_over_c1"] = bat[64] / bat[1]
for name in ("default", "nopdl", "nographs", "f32gemv"):
    a = load(f"ablation_{name}.json")
    if a.get("itl_p50_s"):
        out[f"decode_{name}_tok_s"] = 1.0 / a["itl_p50_s"]
for name in ("c64", "c64nommq"):
    a = load(f"ablation_{name}.json")
    if a.get("itl_p50_s"):
        out[f"decode_{name}_tok_s"] = 64.0 / a["itl_p50_s"]
print(json.dumps(out))
PY
fi

for c in 1 64; do
  f="$LOG_DIR/profile_c$c.txt"
  if [ -s "$f" ]; then
    echo
    echo "== GPU time per operation, $c sequence(s) (PAGELLM_CUDA_PROFILE) =="
    sed -n '/time per operation/,$p' "$f" | head -40
  fi
done

# One row per test from ctest's progress lines: "n/N Test #k: Name ....   Passed  0.1 sec".
python3 - "$LOG_DIR/ctest.log" "$ctest_rc" "$((t1 - t0))" "$((t2 - t1))" "$bench_json" \
  "$LOG_DIR/amx.log" "$amx_rc" "$LOG_DIR/kernels.json" <<'PY'
import json, re, sys
log, rc, build_s, test_s = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
bench = json.load(open(sys.argv[5]))
amx_log, amx_rc = open(sys.argv[6], errors="replace").read(), int(sys.argv[7])
try:
    kernels = json.load(open(sys.argv[8])).get("benchmarks", [])
except Exception:
    kernels = []
if kernels:
    print()
    print("== kernels (bench_cuda_kernels) ==")
    print(f"{'kernel/type/shape/n':40}  {'us':>9}  {'of_bw':>6}  {'vec/s':>10}")
    for k in kernels:
        if k.get("error_occurred"):
            print(f"{k['name']:40}  {k.get('error_message', 'error')}")
            continue
        print(f"{k['name']:40}  {k['real_time']:9.2f}  {k.get('of_bw', 0):6.3f}  "
              f"{k.get('vec_per_s', 0):10.4g}")
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
if bench:
    print()
    print("== 8B-shape Q4_0 benchmark ==")
    for k, v in bench.items():
        print(f"{k:20} {v:.4g}" if isinstance(v, float) else f"{k:20} {v}")
    goals = []
    if "roofline_fraction" in bench:
        goals.append(("decode >= 60% of HBM roofline", bench["roofline_fraction"] >= 0.6))
    if "c64_over_c1" in bench:
        goals.append(("c64 >= 10x c1", bench["c64_over_c1"] >= 10))
    for g, met in goals:
        print(f"goal: {g}: {'met' if met else 'NOT met'}")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
has_amx = any(" amx_int8" in l for l in open("/proc/cpuinfo") if l.startswith("flags"))
hw = re.search(r"\[\s*(OK|SKIPPED|FAILED)\s*\] PackedMatmul.AmxKernelOnTheCpuTiles", amx_log)
print()
print(f"host CPU: {cpu}; AMX-INT8: {'yes' if has_amx else 'no'}; "
      f"AMX kernels on the CPU's tiles: {hw.group(1) if hw else 'not run'}; "
      f"CPU matmul tests: {'passed' if amx_rc == 0 else 'FAILED'}")
ok = rc == 0 and rows and not failed and not skipped and amx_rc == 0
print("RESULT:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
