#include "tensor/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tensor/convert.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace pagellm {
namespace {

bool is_nan_half(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}

// The exact value of a finite half, computed from its fields in double.
double half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 31) return sign ? -HUGE_VAL : HUGE_VAL;  // infinity (NaNs are not asked)
  const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -mag : mag;
}

TEST(Fp16, KnownValues) {
  const struct {
    uint16_t h;
    float f;
  } cases[] = {
      {0x0000, 0.0f},
      {0x3c00, 1.0f},
      {0xc000, -2.0f},
      {0x3800, 0.5f},
      {0x3555, 0.333251953125f},
      {0x7bff, 65504.0f},
      {0xfbff, -65504.0f},
      {0x0400, 6.103515625e-05f},
      {0x0001, 5.9604644775390625e-08f},
      {0x03ff, 6.0975551605224609375e-05f},
      {0x4900, 10.0f},
      {0xb400, -0.25f},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(fp16_to_fp32_portable(c.h), c.f) << std::hex << c.h;
    EXPECT_EQ(fp16_to_fp32(c.h), c.f) << std::hex << c.h;
    EXPECT_EQ(fp32_to_fp16_portable(c.f), c.h) << c.f;
    EXPECT_EQ(fp32_to_fp16(c.f), c.h) << c.f;
  }
  EXPECT_TRUE(std::signbit(fp16_to_fp32_portable(0x8000)));
  EXPECT_EQ(fp16_to_fp32_portable(0x8000), 0.0f);
  EXPECT_EQ(fp32_to_fp16_portable(-0.0f), 0x8000);
  EXPECT_EQ(fp16_to_fp32_portable(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32_portable(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32_portable(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32_portable(0x7c01)));  // signalling NaN stays NaN
  EXPECT_EQ(fp32_to_fp16_portable(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16_portable(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(is_nan_half(fp32_to_fp16_portable(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_nan_half(fp32_to_fp16_portable(std::numeric_limits<float>::signaling_NaN())));
  EXPECT_TRUE(is_nan_half(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Fp16, RoundsToNearestEven) {
  const struct {
    float f;
    uint16_t h;
  } cases[] = {
      {1.0f + 0x1p-11f, 0x3c00},             // halfway, 1.0 is even
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},  // just above halfway
      {1.0f + 3 * 0x1p-11f, 0x3c02},         // halfway between 0x3c01 and 0x3c02 -> even
      {1.0f + 0x1p-11f - 0x1p-23f, 0x3c00},  // just below halfway
      {65519.0f, 0x7bff},                    // below the overflow midpoint
      {65520.0f, 0x7c00},                    // the midpoint 65520 rounds to even = inf
      {1e6f, 0x7c00},
      {-1e6f, 0xfc00},
      {3.4e38f, 0x7c00},
      {0x1p-25f, 0x0000},  // half the smallest subnormal -> 0 (even)
      {0x1p-25f + 0x1p-40f, 0x0001},
      {3 * 0x1p-25f, 0x0002},        // 1.5 ulp -> 2 (even)
      {5 * 0x1p-25f, 0x0002},        // 2.5 ulp -> 2 (even)
      {1023.5f * 0x1p-24f, 0x0400},  // largest subnormal + half ulp -> smallest normal
      {1e-10f, 0x0000},
      {-1e-10f, 0x8000},
      {0x1p-14f, 0x0400},
      {-0x1p-24f, 0x8001},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(fp32_to_fp16_portable(c.f), c.h) << c.f;
    EXPECT_EQ(fp32_to_fp16(c.f), c.h) << c.f;
  }
}

TEST(Fp16, AllHalvesRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = fp16_to_fp32_portable(h);
    if (is_nan_half(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // Quieted, with the sign and the payload's top bits kept.
      ASSERT_EQ(fp32_to_fp16_portable(f), h | 0x0200) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), half_value(h)) << std::hex << h;
    ASSERT_EQ(fp32_to_fp16_portable(f), h) << std::hex << h;
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(h)), h) << std::hex << h;
  }
}

TEST(Fp16, PortableMatchesF16cOnAllHalves) {
#if PAGELLM_F16C_PATH
  if (!cpu_has_f16c()) GTEST_SKIP() << "this CPU has no F16C";
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    ASSERT_EQ(fp32_to_bits(fp16_to_fp32_portable(h)), fp32_to_bits(fp16_to_fp32_f16c(h)))
        << std::hex << h;
  }
#else
  GTEST_SKIP() << "not an x86 build";
#endif
}

TEST(Fp16, PortableMatchesF16cOnManyFloats) {
#if PAGELLM_F16C_PATH
  if (!cpu_has_f16c()) GTEST_SKIP() << "this CPU has no F16C";
  auto check = [](uint32_t bits) {
    const float f = fp32_from_bits(bits);
    const uint16_t a = fp32_to_fp16_portable(f);
    const uint16_t b = fp32_to_fp16_f16c(f);
    if (a != b) {
      ADD_FAILURE() << std::hex << "bits " << bits << ": portable " << a << " f16c " << b;
      return false;
    }
    return true;
  };
  // A stride through every exponent and sign, NaNs and infinities included.
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 251)
    if (!check(static_cast<uint32_t>(bits))) return;
  // Dense around the half range's edges: subnormals, the overflow point.
  for (uint32_t base : {0x33000000u, 0x38800000u, 0x477fe000u, 0x477ff000u})
    for (uint32_t d = 0; d < 0x4000; ++d)
      if (!check(base - 0x2000 + d) || !check((base - 0x2000 + d) | 0x80000000u)) return;
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i)
    if (!check(rng())) return;
#else
  GTEST_SKIP() << "not an x86 build";
#endif
}

// Independent of any conversion code: the chosen half must be a nearest one,
// ties going to the even mantissa.
TEST(Fp16, PortableConversionIsCorrectlyRounded) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-26.0f, 16.5f);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(1.0f + static_cast<float>(rng() & 0x7fffff) * 0x1p-23f,
                               static_cast<int>(std::floor(exponent(rng)))) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    if (std::fabs(f) >= 65520.0f) continue;
    const uint16_t h = fp32_to_fp16_portable(f);
    const double err = std::fabs(half_value(h) - f);
    // Neighbours (same sign) must not be strictly closer.
    const uint16_t mag = h & 0x7fff;
    if (mag < 0x7bff) {
      ASSERT_LE(err, std::fabs(half_value(static_cast<uint16_t>(h + 1)) - f)) << f;
    }
    if (mag > 0) {
      ASSERT_LE(err, std::fabs(half_value(static_cast<uint16_t>(h - 1)) - f)) << f;
    }
    if (mag < 0x7bff && err == std::fabs(half_value(static_cast<uint16_t>(h + 1)) - f) && err > 0) {
      ASSERT_EQ(h & 1, 0) << f;  // a tie goes to the even neighbour
    }
  }
}

TEST(Bf16, KnownValuesAndRounding) {
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xc040), -3.0f);
  EXPECT_EQ(bf16_to_fp32(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-3.0f), 0xc040);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);                     // tie -> even
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);          // above the tie
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);                 // tie -> even
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x00010000)), 0x0001);  // subnormal, exact
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x00008000)), 0x0000);  // tie -> even
  const uint16_t nan = fp32_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan)));
  const uint16_t snan = fp32_to_bf16(fp32_from_bits(0x7f800001));  // payload only in low bits
  EXPECT_TRUE(std::isnan(bf16_to_fp32(snan)));
}

TEST(Bf16, AllValuesRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = bf16_to_fp32(h);
    EXPECT_EQ(fp32_to_bits(f), static_cast<uint32_t>(h) << 16);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), h) << std::hex << h;
  }
}

TEST(FloatRows, MatchScalarConversions) {
  // Every half, in a row whose length is not a multiple of the SIMD width.
  const int64_t n = 65536 - 3;
  std::vector<uint16_t> halves(n);
  for (int64_t i = 0; i < n; ++i) halves[i] = static_cast<uint16_t>(i + 3);
  std::vector<float> out(n);
  dequantize_row(DType::F16, halves.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(fp32_to_bits(out[i]), fp32_to_bits(fp16_to_fp32(halves[i]))) << i;
  dequantize_row(DType::BF16, halves.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(fp32_to_bits(out[i]), uint32_t(halves[i]) << 16) << i;

  std::mt19937 rng(3);
  std::vector<float> x(1003);
  for (auto& v : x) v = fp32_from_bits(rng());
  x[0] = 1.0f + 0x1p-11f;
  std::vector<uint16_t> h(x.size());
  quantize_row(DType::F16, x.data(), h.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], fp32_to_fp16_portable(x[i])) << i;
  quantize_row(DType::BF16, x.data(), h.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], fp32_to_bf16(x[i])) << i;
  std::vector<float> copy(x.size()), back(x.size());
  quantize_row(DType::F32, x.data(), copy.data(), static_cast<int64_t>(x.size()));
  dequantize_row(DType::F32, copy.data(), back.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(fp32_to_bits(back[i]), fp32_to_bits(x[i]));
}

}  // namespace
}  // namespace pagellm
