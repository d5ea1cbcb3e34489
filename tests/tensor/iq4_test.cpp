// IQ4_NL and IQ4_XS: hand-built blocks decoded against values worked out from
// the documented layout (blocks.h), and the encoder checked against
// invariants: exact round trips of representable data, no worse than the
// plain "largest element on the table's end" encoding, and better than Q4_0
// on gaussian data (what the non-uniform table is for).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/quant_test_util.h"

namespace pagellm {
namespace {

using namespace test;

// The IQ4_NL value table as published with the format (not the engine's copy).
constexpr int kTable[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                            1,    13,   25,  38,  53,  69,  89,  113};

TEST(Iq4, Iq4NlHandBuiltBlocks) {
  std::vector<BlockIQ4_NL> b(2);
  // Block 0: d = 0.5; byte j = j | (15 - j) << 4.
  b[0].d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b[0].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  // Block 1: d = -2; every byte 0x8f (element j: code 15, element j + 16: code 8).
  b[1].d = kHalfMinusTwo;
  std::memset(b[1].qs, 0x8f, 16);
  const auto y = decode(DType::IQ4_NL, b);
  ASSERT_EQ(y.size(), 64u);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * kTable[j]) << j;
    EXPECT_EQ(y[16 + j], 0.5f * kTable[15 - j]) << j;
    EXPECT_EQ(y[32 + j], -2.0f * 113) << j;
    EXPECT_EQ(y[48 + j], -2.0f * 1) << j;
  }
}

TEST(Iq4, Iq4XsHandBuiltBlock) {
  BlockIQ4_XS b{};
  b.d = kHalfQuarter;  // 0.25
  // 6-bit scale codes 0, 1, 31, 32, 33, 47, 62, 63 (multipliers -32, -31, -1, 0,
  // 1, 15, 30, 31), packed by hand: low nibbles 0,1 | 15,0 | 1,15 | 14,15,
  // high bits 0,0,1,2,2,2,3,3 at bits 2s.
  b.scales_l[0] = 0x10;
  b.scales_l[1] = 0x0f;
  b.scales_l[2] = 0xf1;
  b.scales_l[3] = 0xfe;
  b.scales_h = 0xfa90;
  const int mult[8] = {-32, -31, -1, 0, 1, 15, 30, 31};
  for (int s = 0; s < 8; ++s)
    for (int j = 0; j < 16; ++j)
      b.qs[16 * s + j] = static_cast<uint8_t>(((j + s) & 15) | (((3 * j + s) & 15) << 4));
  const auto y = decode(DType::IQ4_XS, std::vector<BlockIQ4_XS>{b});
  ASSERT_EQ(y.size(), 256u);
  for (int s = 0; s < 8; ++s)
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[32 * s + j], 0.25f * static_cast<float>(mult[s] * kTable[(j + s) & 15]))
          << s << ":" << j;
      EXPECT_EQ(y[32 * s + 16 + j], 0.25f * static_cast<float>(mult[s] * kTable[(3 * j + s) & 15]))
          << s << ":" << j;
    }
}

// Data that is exactly d * table value (with d an f16 and every group holding
// the -127 code) comes back bit for bit.
TEST(Iq4, RepresentableDataRoundTripsExactly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> code(1, 15);
  // IQ4_NL: per block its own scale.
  std::vector<float> x(32 * 8);
  for (int b = 0; b < 8; ++b) {
    const float d =
        fp16_to_fp32(fp32_to_fp16(0.01f * static_cast<float>(b + 1) * (b % 2 ? -1 : 1)));
    for (int j = 0; j < 32; ++j)
      x[32 * b + j] = d * static_cast<float>(kTable[j == 5 ? 0 : code(rng)]);
  }
  EXPECT_EQ(decode_bytes(DType::IQ4_NL, encode(DType::IQ4_NL, x), 256), x);
  // IQ4_XS: super-block scale d, sub-block multipliers with -32 the largest.
  const float d = fp16_to_fp32(fp32_to_fp16(-0.0037f));
  const int mult[8] = {5, -32, 17, 1, -9, 31, -1, 12};
  for (int s = 0; s < 8; ++s)
    for (int j = 0; j < 32; ++j)
      x[32 * s + j] =
          d * static_cast<float>(mult[s]) * static_cast<float>(kTable[j == 9 ? 0 : code(rng)]);
  EXPECT_EQ(decode_bytes(DType::IQ4_XS, encode(DType::IQ4_XS, x), 256), x);
}

double sq_error(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += (static_cast<double>(y[i]) - x[i]) * (y[i] - x[i]);
  return e;
}

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

// Per IQ4_NL block, no worse than the plain encoding: d = (largest-magnitude
// element) / -127 rounded to f16, every element on its nearest table value.
TEST(Iq4, Iq4NlNoWorseThanPlainEncoding) {
  const auto x = gaussian(32 * 256, 11);
  const auto y = decode_bytes(DType::IQ4_NL, encode(DType::IQ4_NL, x), 32 * 256);
  for (int b = 0; b < 256; ++b) {
    const std::vector<float> xb(x.begin() + 32 * b, x.begin() + 32 * b + 32);
    float max = 0;
    for (float v : xb) max = std::fabs(v) > std::fabs(max) ? v : max;
    const float d = fp16_to_fp32(fp32_to_fp16(max / -127.0f));
    std::vector<float> plain(32);
    for (int i = 0; i < 32; ++i) {
      int best = 0;
      for (int c = 1; c < 16; ++c)
        if (std::fabs(xb[i] - d * kTable[c]) < std::fabs(xb[i] - d * kTable[best])) best = c;
      plain[i] = d * static_cast<float>(kTable[best]);
    }
    const std::vector<float> yb(y.begin() + 32 * b, y.begin() + 32 * b + 32);
    EXPECT_LE(sq_error(xb, yb), sq_error(xb, plain) * 1.001 + 1e-12) << "block " << b;
  }
}

// The non-uniform table fits gaussian weights better than Q4_0's uniform grid
// at the same 4.5 bits (IQ4_NL) or fewer (IQ4_XS, 4.25).
TEST(Iq4, BeatsQ4_0OnGaussianData) {
  const auto x = gaussian(256 * 128, 12);
  const int64_t n = static_cast<int64_t>(x.size());
  const double q4 = sq_error(x, decode_bytes(DType::Q4_0, encode(DType::Q4_0, x), n));
  const double nl = sq_error(x, decode_bytes(DType::IQ4_NL, encode(DType::IQ4_NL, x), n));
  const double xs = sq_error(x, decode_bytes(DType::IQ4_XS, encode(DType::IQ4_XS, x), n));
  EXPECT_LT(nl, q4);
  EXPECT_LT(xs, q4);
}

// Values past the f16 range (a scale that would overflow) decode to finite
// numbers: the scale is clamped to the largest f16.
TEST(Iq4, HugeValuesDecodeFinite) {
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = (i % 3 ? 1e30f : -3e32f) * static_cast<float>(i % 7 + 1);
  for (DType t : {DType::IQ4_NL, DType::IQ4_XS})
    for (float v : decode_bytes(t, encode(t, x), 256))
      ASSERT_TRUE(std::isfinite(v)) << dtype_name(t);
}

}  // namespace
}  // namespace pagellm
