// Quantize-then-dequantize checks: per-element error bounds that follow from
// each format's definition for the legacy and Q8_K formats, relative RMS
// bounds for the K-quants, and a few semantic properties of the encoders.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/quant_test_util.h"

namespace pagellm {
namespace {

using namespace test;

constexpr float kHalfRel = 1.0f / 2048;  // max relative rounding error of f32 -> f16

struct Distribution {
  const char* name;
  std::function<float(std::mt19937&)> draw;
};

std::vector<Distribution> distributions() {
  return {
      {"gaussian", [](std::mt19937& r) { return std::normal_distribution<float>(0.0f, 1.0f)(r); }},
      {"uniform", [](std::mt19937& r) { return std::uniform_real_distribution<float>(-1, 1)(r); }},
      {"positive",
       [](std::mt19937& r) { return std::uniform_real_distribution<float>(0.2f, 3)(r); }},
      {"small", [](std::mt19937& r) { return std::normal_distribution<float>(0.0f, 0.02f)(r); }},
      {"large", [](std::mt19937& r) { return std::normal_distribution<float>(5.0f, 300.0f)(r); }},
      {"outliers",
       [](std::mt19937& r) {
         float v = std::normal_distribution<float>(0.0f, 1.0f)(r);
         return (r() % 64 == 0) ? 25.0f * v : v;
       }},
  };
}

std::vector<float> sample(const Distribution& dist, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist.draw(rng);
  return x;
}

float signed_absmax_of(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  return m;
}

// ---- legacy formats: per-element bounds ----

// Q8_0 / Q8_1: d = amax / 127, q = round(x / d), decoded with the f16 d'.
// |x - d' q| <= |d q - x| + |q| |d' - d| <= d / 2 + 127 |d' - d|.
template <class Block>
void check_q8(DType type, const std::vector<float>& x) {
  const auto bytes = encode(type, x);
  const auto y = decode_bytes(type, bytes, static_cast<int64_t>(x.size()));
  const auto* blocks = reinterpret_cast<const Block*>(bytes.data());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float* xb = x.data() + 32 * b;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127, ds = fp16_to_fp32(blocks[b].d);
    ASSERT_NEAR(ds, d, d * kHalfRel * 1.001f) << "block " << b;
    const float bound = d / 2 + 127 * std::fabs(ds - d) + 1e-6f * amax;
    for (int j = 0; j < 32; ++j)
      ASSERT_LE(std::fabs(y[32 * b + j] - xb[j]), bound) << "block " << b << " element " << j;
    if constexpr (std::is_same_v<Block, BlockQ8_1>) {
      int sum = 0;
      for (int j = 0; j < 32; ++j) sum += blocks[b].qs[j];
      const float s = d * static_cast<float>(sum);
      ASSERT_NEAR(fp16_to_fp32(blocks[b].s), s, std::fabs(s) * kHalfRel * 1.001f + 1e-7f);
    }
  }
}

// Q4_0 / Q5_0 with L = 8 / 16 levels each side: d = max / -L where max is the
// signed element of largest magnitude, so t = x / d lies in [-L, L] and the
// level t rounds to is clamped to [-L, L - 1]. The error is at most d / 2, or
// |t - (L - 1)| |d| where clamping bites, plus L |d' - d| for the f16 scale.
template <class Block>
void check_symmetric(DType type, int L, const std::vector<float>& x) {
  const auto bytes = encode(type, x);
  const auto y = decode_bytes(type, bytes, static_cast<int64_t>(x.size()));
  const auto* blocks = reinterpret_cast<const Block*>(bytes.data());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float* xb = x.data() + 32 * b;
    const float d = signed_absmax_of(xb, 32) / static_cast<float>(-L);
    const float ds = fp16_to_fp32(blocks[b].d);
    ASSERT_NEAR(ds, d, std::fabs(d) * kHalfRel * 1.001f) << "block " << b;
    for (int j = 0; j < 32; ++j) {
      const float t = d != 0 ? xb[j] / d : 0.0f;
      const float steps = std::max(0.5f, t - static_cast<float>(L - 1));
      const float bound = std::fabs(d) * steps * 1.0001f + L * std::fabs(ds - d) + 1e-30f;
      ASSERT_LE(std::fabs(y[32 * b + j] - xb[j]), bound) << "block " << b << " element " << j;
    }
    // The extreme element decodes to itself up to the f16 rounding of d.
    int jmax = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(xb[j]) > std::fabs(xb[jmax])) jmax = j;
    ASSERT_NEAR(y[32 * b + jmax], xb[jmax], std::fabs(xb[jmax]) * kHalfRel * 1.001f);
  }
}

// Q4_1 / Q5_1 with N = 15 / 31 steps: d = (max - min) / N, m = min; rounding
// to the nearest step is off by at most d / 2, plus the f16 roundings of d
// (times up to N) and of m.
template <class Block>
void check_affine(DType type, int N, const std::vector<float>& x) {
  const auto bytes = encode(type, x);
  const auto y = decode_bytes(type, bytes, static_cast<int64_t>(x.size()));
  const auto* blocks = reinterpret_cast<const Block*>(bytes.data());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float* xb = x.data() + 32 * b;
    float lo = xb[0], hi = xb[0];
    for (int j = 0; j < 32; ++j) lo = std::min(lo, xb[j]), hi = std::max(hi, xb[j]);
    const float d = (hi - lo) / static_cast<float>(N);
    const float ds = fp16_to_fp32(blocks[b].d), ms = fp16_to_fp32(blocks[b].m);
    ASSERT_NEAR(ds, d, d * kHalfRel * 1.001f) << "block " << b;
    ASSERT_NEAR(ms, lo, std::fabs(lo) * kHalfRel * 1.001f) << "block " << b;
    const float bound = d / 2 * 1.0001f + N * std::fabs(ds - d) + std::fabs(ms - lo) +
                        1e-6f * std::max(std::fabs(lo), std::fabs(hi));
    for (int j = 0; j < 32; ++j)
      ASSERT_LE(std::fabs(y[32 * b + j] - xb[j]), bound) << "block " << b << " element " << j;
  }
}

TEST(RoundTrip, LegacyFormatsMeetTheirBounds) {
  uint32_t seed = 100;
  for (const auto& dist : distributions()) {
    SCOPED_TRACE(dist.name);
    const auto x = sample(dist, 32 * 256, seed++);
    check_q8<BlockQ8_0>(DType::Q8_0, x);
    check_q8<BlockQ8_1>(DType::Q8_1, x);
    check_symmetric<BlockQ4_0>(DType::Q4_0, 8, x);
    check_symmetric<BlockQ5_0>(DType::Q5_0, 16, x);
    check_affine<BlockQ4_1>(DType::Q4_1, 15, x);
    check_affine<BlockQ5_1>(DType::Q5_1, 31, x);
  }
}

// Q8_K: d = max / -127 kept as a float, q = round(x / d): |err| <= |d| / 2;
// bsums are the sums of each 16 stored q's.
TEST(RoundTrip, Q8_K) {
  uint32_t seed = 200;
  for (const auto& dist : distributions()) {
    SCOPED_TRACE(dist.name);
    const auto x = sample(dist, 256 * 64, seed++);
    const auto bytes = encode(DType::Q8_K, x);
    const auto y = decode_bytes(DType::Q8_K, bytes, static_cast<int64_t>(x.size()));
    const auto* blocks = reinterpret_cast<const BlockQ8_K*>(bytes.data());
    for (size_t b = 0; b < x.size() / 256; ++b) {
      const float* xb = x.data() + 256 * b;
      const float max = signed_absmax_of(xb, 256);
      const float d = max / -127;
      ASSERT_NEAR(blocks[b].d, d, std::fabs(d) * 1e-6f);
      for (int j = 0; j < 256; ++j) {
        ASSERT_LE(std::fabs(y[256 * b + j] - xb[j]), std::fabs(d) * 0.5001f) << b << ":" << j;
        if (xb[j] == max) {
          ASSERT_EQ(blocks[b].qs[j], -127);
        }
      }
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += blocks[b].qs[16 * g + l];
        ASSERT_EQ(blocks[b].bsums[g], sum) << b << ":" << g;
      }
    }
  }
}

// ---- K-quants: relative RMS error ----

double relative_rms_error(DType type, const std::vector<float>& x) {
  const auto y = decode_bytes(type, encode(type, x), static_cast<int64_t>(x.size()));
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = static_cast<double>(y[i]) - x[i];
    err += e * e;
    ref += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

TEST(RoundTrip, KQuantsRelativeRmsError) {
  // Uniform rounding error is step / sqrt(12). For gaussian data (sigma 1):
  //  - affine types span a sub-block's range, about 4.1 for 32 values and 3.5
  //    for 16: Q4_K 4.1 / 15 / 3.46 = 0.079, Q5_K 0.038, Q2_K (16 values,
  //    3 steps) 0.34;
  //  - symmetric types put the largest |x| (about 2.0 of 16 values, 2.9 of
  //    256) at the most negative level: Q6_K 2.0 / 32 / 3.46 = 0.018, Q3_K
  //    2.0 / 4 / 3.46 = 0.14, Q8_K 2.9 / 127 / 3.46 = 0.0066.
  // The scale search gains a little on the affine types; quantizing the
  // sub-block scales to 4..8 bits loses a little. The bounds leave ~15%
  // headroom over these estimates (and over measured values). Rare large
  // outliers widen the ranges, so they get their own, looser bounds.
  const struct {
    DType type;
    double bound, outlier_bound;
  } cases[] = {
      {DType::Q2_K, 0.34, 0.28},   {DType::Q3_K, 0.17, 0.15},    {DType::Q4_K, 0.082, 0.115},
      {DType::Q5_K, 0.042, 0.062}, {DType::Q6_K, 0.0205, 0.038}, {DType::Q8_K, 0.008, 0.03},
  };
  uint32_t seed = 300;
  for (const auto& dist : distributions()) {
    const auto x = sample(dist, 256 * 128, seed++);
    const bool outliers = std::string(dist.name) == "outliers";
    for (const auto& c : cases) {
      const double e = relative_rms_error(c.type, x);
      EXPECT_LT(e, outliers ? c.outlier_bound : c.bound) << dist.name << " " << dtype_name(c.type);
    }
  }
}

// Every quantizable type: zeros stay exactly zero, a constant comes back
// close, tiny values (scales underflowing f16) stay finite.
TEST(RoundTrip, DegenerateBlocks) {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K,
                  DType::F16, DType::BF16, DType::IQ4_NL, DType::IQ4_XS}) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t n = 512;
    const std::vector<float> zeros(n, 0.0f);
    for (float v : decode_bytes(t, encode(t, zeros), n)) ASSERT_EQ(v, 0.0f);
    for (float c : {0.7f, -3.0f}) {
      const std::vector<float> constant(n, c);
      for (float v : decode_bytes(t, encode(t, constant), n))
        ASSERT_NEAR(v, c, std::fabs(c) * 0.01f);  // every format holds one value to 1%
    }
    std::vector<float> tiny(n);
    for (int64_t i = 0; i < n; ++i) tiny[i] = 1e-9f * static_cast<float>(i % 7 - 3);
    for (float v : decode_bytes(t, encode(t, tiny), n)) {
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_LE(std::fabs(v), 1e-8f);
    }
    std::vector<float> one(n, 0.0f);  // a single nonzero element per row
    one[77] = 2.5f;
    const auto y = decode_bytes(t, encode(t, one), n);
    ASSERT_NEAR(y[77], 2.5f, 2.5f * 0.01f);
  }
}

// A row is a sequence of independent blocks.
TEST(RoundTrip, RowEqualsBlockByBlock) {
  const auto x = sample(distributions()[0], 256 * 4, 400);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K,
                  DType::IQ4_NL, DType::IQ4_XS}) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t bs = dtype_block_size(t);
    const size_t ts = dtype_type_size(t);
    const auto row = encode(t, x);
    for (int64_t b = 0; b < static_cast<int64_t>(x.size()) / bs; ++b) {
      std::vector<uint8_t> one(ts);
      quantize_row(t, x.data() + b * bs, one.data(), bs);
      ASSERT_EQ(std::memcmp(one.data(), row.data() + b * ts, ts), 0) << "block " << b;
    }
  }
}

// The super-block scale is set by the largest sub-block scale, which gets the
// largest code: 63 for Q4_K/Q5_K scales and mins, -128 for Q6_K.
TEST(RoundTrip, KQuantScaleCodesUseTheFullRange) {
  const auto x = sample(distributions()[0], 256 * 16, 500);
  const auto q4 = encode(DType::Q4_K, x);
  const auto q6 = encode(DType::Q6_K, x);
  for (int b = 0; b < 16; ++b) {
    const auto& k4 = reinterpret_cast<const BlockQ4_K*>(q4.data())[b];
    int max_sc = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      // 6-bit codes by the documented packing (see the hand-built tests).
      const int sc =
          j < 4 ? (k4.scales[j] & 63) : ((k4.scales[j + 4] & 15) | ((k4.scales[j - 4] >> 6) << 4));
      const int mn =
          j < 4 ? (k4.scales[j + 4] & 63) : ((k4.scales[j + 4] >> 4) | ((k4.scales[j] >> 6) << 4));
      max_sc = std::max(max_sc, sc);
      max_min = std::max(max_min, mn);
    }
    EXPECT_EQ(max_sc, 63) << b;
    EXPECT_EQ(max_min, 63) << b;  // gaussian sub-blocks all have negative minima
    const auto& k6 = reinterpret_cast<const BlockQ6_K*>(q6.data())[b];
    int min_code = 0;
    for (int j = 0; j < 16; ++j) min_code = std::min<int>(min_code, k6.scales[j]);
    EXPECT_EQ(min_code, -128) << b;
  }
}

}  // namespace
}  // namespace pagellm
