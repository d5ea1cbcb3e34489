#include "backend/exp_negated.h"

#include <bit>
#include <cstdint>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/simd.h"

#if PAGELLM_HAVE_AVX2
#include <immintrin.h>
#endif

namespace pagellm {

namespace {

// exp(y) for y = -x in [-708, 0]: y = k ln2 + r with k an integer (rounded
// by adding 1.5 x 2^52, whose low mantissa bits then hold k) and |r| <=
// ln2 / 2, where the Taylor series to r^13 is exact to ~4e-18; 2^k is built in
// the exponent field from those same bits.
constexpr double kLimit = 708.0;
constexpr double kLog2e = 0x1.71547652b82fep0;
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;  // k x kLn2Hi is exact for |k| < 2^11
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kShift = 0x1.8p52;
constexpr uint64_t kBias = 1023;
// 1/k! for k = 13 down to 2.
constexpr double kInvFact[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                               1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                               1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                               1.0 / 24.0,         1.0 / 6.0,         0.5};

void exp_negated_scalar(const double* x, double* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double xi = x[i];
    const double v = -(xi < kLimit ? xi : kLimit);
    const double t = v * kLog2e + kShift;
    const double k = t - kShift;
    const double r = (v - k * kLn2Hi) - k * kLn2Lo;
    double p = kInvFact[0];
    for (int j = 1; j < 12; ++j) p = p * r + kInvFact[j];
    p = p * r + 1.0;
    p = p * r + 1.0;
    const double scale = std::bit_cast<double>((std::bit_cast<uint64_t>(t) + kBias) << 52);
    y[i] = xi > kLimit ? 0.0 : p * scale;
  }
}

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
inline __m256d exp_negated4(__m256d x) {
  const __m256d limit = _mm256_set1_pd(kLimit), shift = _mm256_set1_pd(kShift);
  const __m256d v = _mm256_sub_pd(_mm256_setzero_pd(), _mm256_min_pd(x, limit));
  const __m256d t = _mm256_fmadd_pd(v, _mm256_set1_pd(kLog2e), shift);
  const __m256d k = _mm256_sub_pd(t, shift);
  const __m256d r =
      _mm256_fnmadd_pd(k, _mm256_set1_pd(kLn2Lo), _mm256_fnmadd_pd(k, _mm256_set1_pd(kLn2Hi), v));
  __m256d p = _mm256_set1_pd(kInvFact[0]);
  for (int j = 1; j < 12; ++j) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kInvFact[j]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  const __m256i bits = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(static_cast<int64_t>(kBias))),
      52);
  const __m256d e = _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
  return _mm256_andnot_pd(_mm256_cmp_pd(x, limit, _CMP_GT_OQ), e);
}

void exp_negated_avx2(const double* x, double* y, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(y + i, exp_negated4(_mm256_loadu_pd(x + i)));
  if (i < n) {
    const int64_t left = static_cast<int64_t>(n - i);
    const __m256i mask =
        _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), _mm256_setr_epi64x(0, 1, 2, 3));
    // Masked-off lanes read as 0 (exp 1) and are not stored.
    _mm256_maskstore_pd(y + i, mask, exp_negated4(_mm256_maskload_pd(x + i, mask)));
  }
}
PAGELLM_TARGET_END
#endif

}  // namespace

void exp_negated(const double* x, double* y, size_t n) {
  exp_negated(x, y, n, cpu::best_isa());
}

void exp_negated(const double* x, double* y, size_t n, cpu::CpuIsa isa) {
#if PAGELLM_HAVE_AVX2
  if (isa >= cpu::CpuIsa::Avx2) return exp_negated_avx2(x, y, n);
#endif
  (void)isa;
  exp_negated_scalar(x, y, n);
}

}  // namespace pagellm
