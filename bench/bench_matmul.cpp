// CPU matmul throughput: GEMV (T = 1, decode) in GB/s of weights streamed, GEMM
// (T = 64, prefill) in GFLOP/s, and a streaming-read roofline for comparison.
// Weights rotate through enough copies to exceed the last-level cache, so the
// GEMV numbers are from memory, not L3. BM_DecodeRows: decode batches of 1-64
// rows in int8 GOP/s and as a fraction (vnni_frac) of the machine's vpdpbusd
// issue rate, which BM_VnniPeak measures with a tight loop on every thread.
//
//   bench_matmul [--benchmark_filter=...]     (PAGELLM_BENCH_THREADS, default 2)
//   bench_matmul --benchmark_filter='VnniPeak|DecodeRows'   (the batched-decode figures)
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/cpu_isa.h"
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

// ---- Batched decode against the VNNI issue rate -------------------------------

#if defined(__x86_64__)
// vpdpbusd zmm instructions per second on this thread: 12 independent chains
// (more than latency x throughput on any core with VNNI), no loads, the best of
// short bursts, so that another process taking the core for a while does not
// count against the rate.
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) double vnni_issue_rate() {
  constexpr long kIters = 200000;  // 2.4M instructions, under a millisecond
  double best = 0;
  for (int burst = 0; burst < 40; ++burst) {
    // Named chains, not an array: GCC keeps an array on the stack (a store and
    // a load per instruction, half the rate).
    __m512i a0 = _mm512_set1_epi32(burst), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    const __m512i u = _mm512_set1_epi32(0x01010101), s = _mm512_set1_epi32(0x02020202);
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < kIters; ++i) {
      // The empty asm keeps the 12 chains and the loop as written.
#define PAGELLM_DP(v) \
  v = _mm512_dpbusd_epi32(v, u, s); \
  __asm__ volatile("" : "+v"(v));
      PAGELLM_DP(a0) PAGELLM_DP(a1) PAGELLM_DP(a2) PAGELLM_DP(a3) PAGELLM_DP(a4) PAGELLM_DP(a5)
      PAGELLM_DP(a6) PAGELLM_DP(a7) PAGELLM_DP(a8) PAGELLM_DP(a9) PAGELLM_DP(a10) PAGELLM_DP(a11)
#undef PAGELLM_DP
    }
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const __m512i sum = _mm512_add_epi32(
        _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                         _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7))),
        _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
    benchmark::DoNotOptimize(sum);
    best = std::max(best, 12.0 * kIters / sec);
  }
  return best;
}
#endif

bool have_vnni512() {
#if defined(__x86_64__)
  return isa_available(CpuIsa::Avx512) && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

// The pool's int8 op rate at the VNNI issue rate (vpdpbusd zmm: 64 multiply-adds,
// 128 ops), every thread running the loop at once; the rounds' best. 0 without
// AVX-512 VNNI. Measured once per process.
double vnni_peak_ops() {
  static const double peak = [] {
    if (!have_vnni512()) return 0.0;
#if defined(__x86_64__)
    const int threads = pool().size();
    std::vector<double> rate(static_cast<size_t>(threads));
    double best = 0;
    for (int round = 0; round < 5; ++round) {
      pool().parallel_for(threads, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) rate[static_cast<size_t>(i)] = vnni_issue_rate();
      });
      double sum = 0;
      for (double r : rate) sum += r;
      best = std::max(best, sum * 128.0);
    }
    return best;
#else
    return 0.0;
#endif
  }();
  return peak;
}

void BM_VnniPeak(benchmark::State& state) {
  if (!have_vnni512()) {
    state.SkipWithError("no AVX-512 VNNI on this CPU");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(vnni_peak_ops());
  state.counters["GOP/s"] = vnni_peak_ops() / 1e9;
  state.SetLabel("int8 ops at the vpdpbusd issue rate x" + std::to_string(pool().size()) + "t");
}
BENCHMARK(BM_VnniPeak)->Iterations(1)->Unit(benchmark::kMillisecond);

// A decode step's matmul (FFN up, 2048 -> 5632) with `rows` sequences, Rows16
// weights streamed from memory as in the model; the activations are quantized
// inside (as matmul does). vnni_frac: the int8 op rate over BM_VnniPeak's;
// best_frac: the fastest call's.
void BM_DecodeRows(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t rows = state.range(1), n_in = 2048, n_out = 5632;
  Weights w(type, n_in, n_out, kRotateBytes, true);
  std::vector<float> x(static_cast<size_t>(rows * n_in)), y(static_cast<size_t>(rows * n_out));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  MatmulScratch scratch;
  const double peak = vnni_peak_ops();  // before the timing starts
  size_t i = 0;
  double best = 1e30;  // seconds, the fastest call
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    matmul(w.view(i++), x.data(), n_in, rows, y.data(), n_out, pool(), scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double ops = 2.0 * static_cast<double>(n_in * n_out * rows);
  // The fastest call's rate too: on a machine shared with other processes the
  // mean counts the time they take the cores, the peak (best bursts) does not.
  state.counters["best_GOP/s"] = ops / best / 1e9;
  if (peak > 0) state.counters["best_frac"] = ops / best / peak;
  state.SetLabel(std::string(dtype_name(type)) + " rows16 " + isa_name(best_isa()) + " x" +
                 std::to_string(pool().size()) + "t");
  state.counters["GOP/s"] =
      benchmark::Counter(ops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.bytes) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  if (peak > 0)
    state.counters["vnni_frac"] =
        benchmark::Counter(ops / peak, benchmark::Counter::kIsIterationInvariantRate);
}
void decode_rows(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS,
                  DType::MXFP4})
    for (int64_t rows : {1, 2, 4, 8, 16, 32, 64}) b->Args({static_cast<int64_t>(t), rows});
  b->ArgNames({"type", "rows"});
  b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_DecodeRows)->Apply(decode_rows);

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
