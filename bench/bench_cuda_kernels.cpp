// CUDA matrix-product kernels on one GPU, each against the GPU's measured read
// bandwidth (bandwidth.h): the decode GEMVs (int8 gemv_q8, f32 gemv) at 1 to
// 32 vectors, the int8 tensor-core product (mmq) at 33 to 128, and dequantize
// + cuBLAS (gemm) at 64 and 512, on the shapes of an 8B model's layer
// (4096 x 4096, 14336 x 4096, 4096 x 14336). Counters per kernel:
//   weight_GBps  weight bytes read per second (each launch reads its matrix once)
//   of_bw        that over the measured read bandwidth: the roofline fraction a
//                batch-1 decode made of this kernel alone would reach
//   vec_per_s    vectors (tokens) multiplied per second
// Weights rotate through copies larger than the L2, so each launch reads
// device memory. A launch is timed inside a run of back-to-back launches (the
// host's launch cost hidden when kernels take longer than it, as in a CUDA
// graph).
//
//   bench_cuda_kernels [--benchmark_filter=...]   (skips everything without a GPU)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/bandwidth.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_q8.h"
#include "backend/cuda/mmq.h"
#include "backend/cuda/q8_activations.h"
#include "tensor/dtype.h"

namespace {

using namespace pagellm;
using namespace pagellm::cuda;

constexpr size_t kRotateBytes = size_t{512} << 20;  // >> L2 (50 MB on an H200)
constexpr int kLaunches = 20;                       // per timed run

CudaDevice& device() {
  static CudaDevice dev(0);
  return dev;
}

double read_bandwidth() {
  static const double bw = measure_read_bandwidth(device());
  return bw;
}

// Copies of one random matrix (the values do not change the kernels' time).
struct Weights {
  std::vector<DeviceBuffer> copies;
  size_t bytes = 0;
  Weights(DType type, int64_t rows, int64_t cols) {
    bytes = dtype_row_bytes(type, cols) * static_cast<size_t>(rows);
    std::vector<uint8_t> host(bytes);
    std::mt19937 rng(1);
    for (auto& b : host) b = static_cast<uint8_t>(rng());
    const size_t n = std::max<size_t>(2, kRotateBytes / bytes);
    for (size_t i = 0; i < n; ++i) {
      copies.emplace_back(device(), bytes);
      device().to_device(copies.back().data(), host.data(), bytes);
    }
  }
  const void* at(size_t i) const { return copies[i % copies.size()].data(); }
};

enum class Kernel { kGemvQ8, kGemvF32, kMmq, kGemm };

void run(benchmark::State& state, Kernel kernel, DType type, int64_t rows, int64_t cols) {
  if (cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const auto n = static_cast<int32_t>(state.range(0));
  CudaDevice& dev = device();
  const double bw = read_bandwidth();
  Weights w(type, rows, cols);
  std::vector<float> xh(static_cast<size_t>(n * cols));
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (auto& v : xh) v = normal(rng);
  DeviceBuffer x(dev, xh.size() * sizeof(float)), q(dev, q8_act_bytes(n, cols));
  DeviceBuffer y(dev, static_cast<size_t>(n * rows) * sizeof(float));
  dev.to_device(x.data(), xh.data(), xh.size() * sizeof(float));
  quantize_q8_activations(dev, x.as<float>(), cols, n, cols, q.data());
  const Q8ActView a = q8_act_view(q.data(), n, cols);
  GemmWorkspace ws;
  size_t i = 0;
  auto launch = [&] {
    const void* wi = w.at(i++);
    const GemvQ8Target t{wi, rows, y.as<float>(), rows};
    switch (kernel) {
      case Kernel::kGemvQ8:
        return gemv_q8_multi(dev, type, cols, &t, 1, a, n);
      case Kernel::kMmq:
        return mmq_multi(dev, type, cols, &t, 1, a, n);
      case Kernel::kGemvF32:
        return gemv(dev, type, wi, rows, cols, x.as<float>(), cols, y.as<float>(), rows, n);
      case Kernel::kGemm:
        return gemm(dev, ws, type, wi, rows, cols, x.as<float>(), cols, n, y.as<float>(), rows);
    }
  };
  for (int k = 0; k < 3; ++k) launch();  // warm-up (cuBLAS's first call, scratch)
  dev.synchronize();
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kLaunches; ++k) launch();
    dev.synchronize();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    state.SetIterationTime(dt.count() / kLaunches);
    seconds += dt.count() / kLaunches;
  }
  state.counters["weight_GBps"] = benchmark::Counter(
      static_cast<double>(w.bytes) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["vec_per_s"] =
      benchmark::Counter(static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
  if (seconds > 0)
    state.counters["of_bw"] = static_cast<double>(w.bytes) * state.iterations() / seconds / bw;
}

struct Shape {
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};

void register_all() {
  const struct {
    Kernel kernel;
    const char* name;
    std::vector<int64_t> vecs;
    std::vector<DType> types;
  } kernels[] = {
      {Kernel::kGemvQ8,
       "gemv_q8",
       {1, 8, 32},
       {DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q8_0}},
      {Kernel::kGemvF32, "gemv_f32", {1}, {DType::Q4_0, DType::F16}},
      {Kernel::kMmq, "mmq", {33, 64, 128}, {DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q8_0}},
      {Kernel::kGemm, "gemm", {64, 512}, {DType::Q4_0, DType::F16}},
  };
  for (const auto& k : kernels)
    for (DType type : k.types)
      for (const Shape& s : kShapes) {
        const std::string name = std::string(k.name) + "/" + dtype_name(type) + "/" +
                                 std::to_string(s.rows) + "x" + std::to_string(s.cols);
        auto* b = benchmark::RegisterBenchmark(
            name.c_str(),
            [k = k.kernel, type, s](benchmark::State& st) { run(st, k, type, s.rows, s.cols); });
        for (int64_t n : k.vecs) b->Arg(n);
        b->ArgName("n")->UseManualTime()->Unit(benchmark::kMicrosecond);
      }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
