// CPU matmul throughput: GEMV (T = 1, decode) in GB/s of weights streamed, GEMM
// (T = 64, prefill) in GFLOP/s, and a streaming-read roofline for comparison.
// Weights rotate through enough copies to exceed the last-level cache, so the
// GEMV numbers are from memory, not L3.
//
//   bench_matmul [--benchmark_filter=...]     (PAGELLM_BENCH_THREADS, default 2)
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/packed_weights.h"
#include "bench_pool.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "util/thread_pool.h"

namespace {

using namespace pagellm;
using namespace pagellm::cpu;

constexpr size_t kRotateBytes = 512ull << 20;  // >> L3, so each GEMV reads DRAM

using bench::pool;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, AlignedFree>;

Buffer alloc(size_t bytes) {
  return Buffer(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) & ~size_t{63})));
}

// Offsets of the f16 scale fields in a block (set to sane values).
std::vector<size_t> scale_offsets(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return {t == DType::Q3_K ? offsetof(BlockQ3_K, d) : 0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    default:
      return {};
  }
}

// Random weights (n_out x n_in), repeated in as many copies as fit kRotateBytes.
struct Weights {
  DType type;
  int64_t n_in, n_out;
  size_t bytes;
  std::vector<Buffer> copies;

  bool packed;
  Weights(DType t, int64_t in, int64_t out, size_t rotate_bytes, bool pack)
      : type(t), n_in(in), n_out(out), bytes(dtype_row_bytes(t, in) * out), packed(pack) {
    Buffer first = alloc(bytes);
    std::mt19937_64 rng(42);
    const auto& tr = dtype_traits(t);
    if (!tr.is_quantized) {
      std::normal_distribution<float> dist(0.0f, 0.05f);
      for (size_t i = 0; i < bytes / tr.type_size; ++i) {
        float v = dist(rng);
        if (t == DType::F32) std::memcpy(first.get() + 4 * i, &v, 4);
        uint16_t h = t == DType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
        if (t != DType::F32) std::memcpy(first.get() + 2 * i, &h, 2);
      }
    } else {
      for (size_t i = 0; i < bytes; ++i) first.get()[i] = static_cast<uint8_t>(rng());
      const uint16_t h = fp32_to_fp16(0.01f);
      for (size_t b = 0; b < bytes / tr.type_size; ++b)
        for (size_t off : scale_offsets(t))
          std::memcpy(first.get() + b * tr.type_size + off, &h, 2);
      // MXFP4's exponent byte: 2^-8, so no product is subnormal or infinite
      // (whose slow paths the random bytes would otherwise time).
      if (t == DType::MXFP4)
        for (size_t b = 0; b < bytes / tr.type_size; ++b) first.get()[b * tr.type_size] = 119;
    }
    if (packed) {
      Buffer p = alloc(packed_bytes(t, in, out));
      pack_rows16(t, in, out, first.get(), dtype_row_bytes(t, in), p.get());
      bytes = packed_bytes(t, in, out);
      first = std::move(p);
    }
    const size_t n = std::max<size_t>(1, rotate_bytes / bytes);
    for (size_t i = 1; i < n; ++i) {
      copies.push_back(alloc(bytes));
      std::memcpy(copies.back().get(), first.get(), bytes);
    }
    copies.push_back(std::move(first));
  }

  WeightMatrix view(size_t i) const {
    if (packed)
      return {type,
              n_in,
              n_out,
              copies[i % copies.size()].get(),
              packed_group_bytes(type, n_in),
              WeightLayout::Rows16};
    return {type, n_in, n_out, copies[i % copies.size()].get(), dtype_row_bytes(type, n_in)};
  }
};

void run_matmul(benchmark::State& state, int64_t T, bool rotate = true) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t n_in = state.range(1), n_out = state.range(2);
  const bool packed = state.range(3) != 0;
  // Decode-sized batches stream the weights from memory, as in the model.
  Weights w(type, n_in, n_out, T <= 16 && rotate ? kRotateBytes : 0, packed);
  std::vector<float> x(static_cast<size_t>(T * n_in)), y(static_cast<size_t>(T * n_out));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  MatmulScratch scratch;
  size_t i = 0;
  for (auto _ : state) {
    matmul(w.view(i++), x.data(), n_in, T, y.data(), n_out, pool(), scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(dtype_name(type)) + (packed ? " rows16" : "") + " " +
                 isa_name(best_isa()) + " x" + std::to_string(pool().size()) + "t");
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.bytes) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n_in * n_out * T / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  if (T > 1)
    state.counters["tok/s"] =
        benchmark::Counter(static_cast<double>(T), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Gemv(benchmark::State& state) {
  run_matmul(state, 1);
}
void BM_Gemm64(benchmark::State& state) {
  run_matmul(state, 64);
}
// Batched decode: 16 sequences at once.
void BM_Gemm16(benchmark::State& state) {
  run_matmul(state, 16);
}
// Compute-bound GEMV rate: a small matrix that stays in L2.
void BM_GemvCached(benchmark::State& state) {
  run_matmul(state, 1, false);
}

// Compute-bound batched rate: 16 columns times a matrix that stays in L2.
void BM_Gemm16Cached(benchmark::State& state) {
  run_matmul(state, 16, false);
}

void shapes(benchmark::internal::Benchmark* b) {
  // Q2_K, Q3_K: the bulk of Q2_K / Q3_K_S / Q3_K_M files.
  for (DType t :
       {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F16, DType::Q2_K,
        DType::Q3_K, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS,
        DType::MXFP4}) {
    for (int64_t packed : {0, 1}) {
      if (packed && !packable(t)) continue;
      b->Args({static_cast<int64_t>(t), 2048, 5632, packed});  // FFN up
      b->Args({static_cast<int64_t>(t), 5632, 2048, packed});  // FFN down
    }
  }
  b->ArgNames({"type", "n_in", "n_out", "packed"});
  b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Gemv)->Apply(shapes);
// The output layer's shape (vocab 32000), 6x the FFN matrix: per-job costs
// (waking the threads, the last chunk) weigh less than in BM_Gemv.
void output_shapes(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16})
    b->Args({static_cast<int64_t>(t), 2048, 32000, 1});
  b->ArgNames({"type", "n_in", "n_out", "packed"});
  b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_Gemv)->Apply(output_shapes);
BENCHMARK(BM_Gemm64)->Apply(shapes);
BENCHMARK(BM_Gemm16)->Apply(shapes);
void cached_shapes(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F16,
                  DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS,
                  DType::MXFP4}) {
    b->Args({static_cast<int64_t>(t), 2048, 256, 0});
    if (packable(t)) b->Args({static_cast<int64_t>(t), 2048, 256, 1});
  }
  b->ArgNames({"type", "n_in", "n_out", "packed"});
  b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_GemvCached)->Apply(cached_shapes);
BENCHMARK(BM_Gemm16Cached)->Apply(cached_shapes);

// Sum of 64-bit words over `bytes` (a multiple of 128), four independent
// accumulators, vector loads where available: far below the core's add rate.
// With prefetch > 0, also hints the line that many bytes ahead into L2 (as the
// kernels do for their weights).
#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t sum_bytes_avx2(const uint8_t* p, size_t bytes,
                                                        size_t prefetch) {
  const auto* v = reinterpret_cast<const __m256i*>(p);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < bytes / 32; i += 4) {
    if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(v + i) + prefetch, _MM_HINT_T1);
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(v + i));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(v + i + 1));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(v + i + 2));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(v + i + 3));
  }
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  return static_cast<uint64_t>(_mm256_extract_epi64(s, 0));
}
#endif

uint64_t sum_bytes(const uint8_t* p, size_t bytes, size_t prefetch) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return sum_bytes_avx2(p, bytes, prefetch);
#endif
  (void)prefetch;
  const auto* v = reinterpret_cast<const uint64_t*>(p);
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < bytes / 8; i += 4) {
    s0 += v[i];
    s1 += v[i + 1];
    s2 += v[i + 2];
    s3 += v[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

// Roofline: every thread sums its share of a 512 MiB buffer with 256-bit loads
// and four independent accumulators (far below the core's add throughput).
void BM_StreamRead(benchmark::State& state) {
  const auto prefetch = static_cast<size_t>(state.range(0));
  const size_t bytes = kRotateBytes;
  Buffer buf = alloc(bytes);
  std::memset(buf.get(), 1, bytes);
  std::vector<uint64_t> sums(64);
  for (auto _ : state) {
    pool().parallel_for(
        static_cast<int64_t>(bytes / 128),
        [&](int64_t b, int64_t e, int t) {
          sums[t] = sum_bytes(buf.get() + 128 * b, 128 * (e - b), prefetch);
        },
        64);
    benchmark::DoNotOptimize(sums.data());
  }
  std::string label = "x";
  label += std::to_string(pool().size());
  state.SetLabel(label + "t");
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamRead)
    ->ArgName("prefetch")
    ->Arg(0)
    ->Arg(4096)
    ->Arg(16384)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
