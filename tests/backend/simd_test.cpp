// The vectorised exp of the kernels (simd.h: exp8 for AVX2, exp16 for
// AVX-512) against std::exp: relative error across the softmax range, 0 for
// -inf and for inputs below the range, finite at the top of it. The
// vectorised tanh of the score soft cap (tanh8) against tanh in double.
#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_isa.h"

namespace pagellm::cpu {
namespace {

std::vector<float> inputs() {
  std::vector<float> x;
  for (float v = -90.0f; v <= 88.0f; v += 0.37f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-8f, -1e-8f, -87.3f, -87.2f, 87.9f, 88.0f, -88.0f, -103.0f,
                  -1000.0f, -std::numeric_limits<float>::infinity()})
    x.push_back(v);
  while (x.size() % 16) x.push_back(0.0f);
  return x;
}

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
std::vector<float> exp8_of(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += 8)
    _mm256_storeu_ps(&y[i], simd::exp8(_mm256_loadu_ps(&x[i])));
  return y;
}
PAGELLM_TARGET_END
#endif
#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
std::vector<float> exp16_of(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += 16)
    _mm512_storeu_ps(&y[i], simd::exp16(_mm512_loadu_ps(&x[i])));
  return y;
}
PAGELLM_TARGET_END
#endif

// Within 1e-6 relative where exp(x) is a normal float; 0 (exp8) or at most
// the smallest normal (exp16 keeps denormals down to -104) below; never NaN.
void check(const std::vector<float>& x, const std::vector<float>& y, const char* name) {
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_FALSE(std::isnan(y[i])) << name << " x=" << x[i];
    ASSERT_TRUE(std::isfinite(y[i])) << name << " x=" << x[i];
    const double want = std::exp(static_cast<double>(x[i]));
    if (want >= std::numeric_limits<float>::min()) {
      EXPECT_NEAR(y[i], want, 1e-6 * want) << name << " x=" << x[i];
    } else {
      EXPECT_LE(y[i], std::numeric_limits<float>::min()) << name << " x=" << x[i];
    }
    if (std::isinf(x[i])) {
      EXPECT_EQ(y[i], 0.0f) << name;
    }
  }
}

TEST(SimdExp, Exp8MatchesStdExp) {
#if PAGELLM_HAVE_AVX2
  if (!isa_available(CpuIsa::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const auto x = inputs();
  check(x, exp8_of(x), "exp8");
#else
  GTEST_SKIP() << "AVX2 kernels not compiled in";
#endif
}

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
std::vector<float> tanh8_of(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += 8)
    _mm256_storeu_ps(&y[i], simd::tanh8(_mm256_loadu_ps(&x[i])));
  return y;
}
PAGELLM_TARGET_END
#endif

// Within 4e-7 relative (both branches, around the switch at |x| = 0.5, tiny
// and saturated inputs), odd, and exactly +-1 far out (never NaN at +-inf).
TEST(SimdTanh, Tanh8MatchesTanhInDouble) {
#if PAGELLM_HAVE_AVX2
  if (!isa_available(CpuIsa::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.0173f) x.push_back(v);
  for (float v = 0.49f; v <= 0.51f; v += 1e-4f) x.push_back(v), x.push_back(-v);
  for (float v :
       {0.0f, -0.0f, 1e-30f, -1e-8f, 3e-4f, 0.5f, -0.5f, std::nextafter(0.5f, 0.0f), 44.0f, -90.0f,
        1e6f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    x.push_back(v);
  while (x.size() % 8) x.push_back(0.25f);
  const auto y = tanh8_of(x);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::tanh(static_cast<double>(x[i]));
    EXPECT_NEAR(y[i], want, 4e-7 * std::abs(want)) << "x=" << x[i];
    if (std::abs(x[i]) >= 10.0f) EXPECT_EQ(y[i], x[i] > 0 ? 1.0f : -1.0f) << "x=" << x[i];
  }
  std::vector<float> neg(x.size());
  for (size_t i = 0; i < x.size(); ++i) neg[i] = -x[i];
  const auto yn = tanh8_of(neg);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(yn[i], -y[i]) << "x=" << x[i];
#else
  GTEST_SKIP() << "AVX2 kernels not compiled in";
#endif
}

TEST(SimdExp, Exp16MatchesStdExp) {
#if PAGELLM_HAVE_AVX512
  if (!isa_available(CpuIsa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const auto x = inputs();
  check(x, exp16_of(x), "exp16");
#else
  GTEST_SKIP() << "AVX-512 kernels not compiled in";
#endif
}

}  // namespace
}  // namespace pagellm::cpu
