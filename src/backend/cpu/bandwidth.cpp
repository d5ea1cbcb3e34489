#include "backend/cpu/bandwidth.h"

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include "backend/cpu/cpu_isa.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace pagellm::cpu {

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<double, FreeDeleter>;

Buffer alloc(size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) & ~size_t{63});
  if (!p) throw std::bad_alloc();
  return Buffer(static_cast<double*>(p));
}

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// Sum of n doubles with four independent chains (far below the add throughput).
double sum_avx2(const double* v, int64_t n) {
  __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_add_pd(s0, _mm256_load_pd(v + i));
    s1 = _mm256_add_pd(s1, _mm256_load_pd(v + i + 4));
    s2 = _mm256_add_pd(s2, _mm256_load_pd(v + i + 8));
    s3 = _mm256_add_pd(s3, _mm256_load_pd(v + i + 12));
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
  double s = t[0] + t[1] + t[2] + t[3];
  for (; i < n; ++i) s += v[i];
  return s;
}
PAGELLM_TARGET_END
#endif

// Sum of n doubles, in eight independent chains without AVX2.
double sum(const double* v, int64_t n) {
#if PAGELLM_HAVE_AVX2
  if (best_isa() >= CpuIsa::Avx2) return sum_avx2(v, n);
#endif
  double s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += v[i + j];
  for (; i < n; ++i) s[0] += v[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr int64_t kGrain = 1024;  // doubles per share unit (8 KiB)

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes, int repeats) {
  const int64_t n = static_cast<int64_t>(buffer_bytes / sizeof(double)) / kGrain * kGrain;
  const size_t bytes = static_cast<size_t>(n) * sizeof(double);
  Buffer buf = alloc(bytes);
  // First touch from the pool's threads, so pages sit where they are read.
  pool.parallel_for(
      n, [&](int64_t b, int64_t e, int) { std::fill(buf.get() + b, buf.get() + e, 1.0); }, kGrain);
  std::vector<double> sink(static_cast<size_t>(pool.size()) + 1, 0.0);
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e, int t) {
          sink[static_cast<size_t>(t)] += sum(buf.get() + b, e - b);
        },
        kGrain);
    best = std::max(best, static_cast<double>(bytes) / seconds_since(t0));
  }
  volatile double keep = sink[0];
  (void)keep;
  return best;
}

Bandwidth measure_bandwidth(ThreadPool& pool, size_t buffer_bytes, int repeats) {
  const int64_t n = static_cast<int64_t>(buffer_bytes / sizeof(double)) / kGrain * kGrain;
  Bandwidth bw;
  bw.buffer_bytes = static_cast<size_t>(n) * sizeof(double);
  bw.read_bytes_per_s = measure_read_bandwidth(pool, buffer_bytes, repeats);

  const int64_t m = n / 3 / kGrain * kGrain;
  Buffer a = alloc(static_cast<size_t>(m) * 8), b = alloc(static_cast<size_t>(m) * 8),
         c = alloc(static_cast<size_t>(m) * 8);
  pool.parallel_for(
      m,
      [&](int64_t lo, int64_t hi, int) {
        std::fill(a.get() + lo, a.get() + hi, 0.0);
        std::fill(b.get() + lo, b.get() + hi, 1.0);
        std::fill(c.get() + lo, c.get() + hi, 2.0);
      },
      kGrain);
  double best = 0;
  const double s = 3.0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(
        m,
        [&](int64_t lo, int64_t hi, int) {
          double* pa = a.get();
          const double* pb = b.get();
          const double* pc = c.get();
          for (int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
        },
        kGrain);
    best = std::max(best, 3.0 * 8.0 * static_cast<double>(m) / seconds_since(t0));
  }
  bw.triad_bytes_per_s = best;
  volatile double keep = a.get()[m / 2];
  (void)keep;
  return bw;
}

}  // namespace pagellm::cpu
