// MXFP4: hand-built blocks decoded against values worked out in double from
// the OCP MX description (E8M0 scale 2^(e-127), E2M1 element: sign, 2-bit
// exponent with bias 1, 1-bit mantissa, subnormal at exponent 0), and the
// encoder against a brute-force nearest-value rounding at the two scales it
// may pick.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/quant_test_util.h"

namespace pagellm {
namespace {

using test::decode;
using test::decode_bytes;
using test::encode;

// E2M1 code -> value, from the bit fields (not the engine's table).
double e2m1(int code) {
  const int sign = (code >> 3) & 1, exp = (code >> 1) & 3, man = code & 1;
  const double mag = exp == 0 ? 0.5 * man : (1.0 + 0.5 * man) * std::ldexp(1.0, exp - 1);
  return sign ? -mag : mag;
}

double e8m0(int e) {
  return std::ldexp(1.0, e - 127);
}

// A value as a float holds it: beyond the float range (e >= 254 with large
// codes), infinity.
double as_float(double v) {
  return std::fabs(v) > std::numeric_limits<float>::max() ? std::copysign(INFINITY, v) : v;
}

// The naive float64 rendition of a row of blocks (as floats hold the values).
std::vector<double> naive_decode(const uint8_t* p, int64_t nb) {
  std::vector<double> y;
  for (int64_t b = 0; b < nb; ++b, p += 17) {
    std::vector<double> blk(32);
    for (int j = 0; j < 16; ++j) {
      blk[j] = as_float(e8m0(p[0]) * e2m1(p[1 + j] & 15));
      blk[j + 16] = as_float(e8m0(p[0]) * e2m1(p[1 + j] >> 4));
    }
    y.insert(y.end(), blk.begin(), blk.end());
  }
  return y;
}

TEST(Mxfp4, LayoutIsSeventeenBytes) {
  EXPECT_EQ(sizeof(BlockMXFP4), 17u);
  EXPECT_EQ(dtype_type_size(DType::MXFP4), 17u);
  EXPECT_EQ(dtype_block_size(DType::MXFP4), 32);
  EXPECT_EQ(dtype_row_bytes(DType::MXFP4, 2880), 90u * 17);
  EXPECT_EQ(dtype_alignment(DType::MXFP4), 1u);
}

// Every code in both nibbles under scales from the subnormal ends to the top.
TEST(Mxfp4, DecodesEveryCodeAndScale) {
  for (int e : {0, 1, 2, 100, 126, 127, 128, 200, 254, 255}) {
    std::vector<BlockMXFP4> b(2);
    for (int k = 0; k < 2; ++k) {
      b[k].e = static_cast<uint8_t>(e);
      for (int j = 0; j < 16; ++j)  // low nibble j, high nibble 15 - j (k = 1 swaps)
        b[k].qs[j] = static_cast<uint8_t>(k == 0 ? j | ((15 - j) << 4) : (15 - j) | (j << 4));
    }
    const auto y = decode(DType::MXFP4, b);
    const auto ref = naive_decode(reinterpret_cast<const uint8_t*>(b.data()), 2);
    ASSERT_EQ(y.size(), ref.size());
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(static_cast<double>(y[i]), ref[i]) << "e=" << e << " element " << i;
  }
}

// Random bytes: the engine's decode equals the float64 rendition exactly
// (every value 2^(e-127) * E2M1 is a float).
TEST(Mxfp4, RandomBlocksDecodeExactly) {
  std::mt19937_64 rng(7);
  const int64_t nb = 64;
  std::vector<uint8_t> bytes(17 * nb);
  for (auto& v : bytes) v = static_cast<uint8_t>(rng());
  const auto y = decode_bytes(DType::MXFP4, bytes, 32 * nb);
  const auto ref = naive_decode(bytes.data(), nb);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(static_cast<double>(y[i]), ref[i]) << i;
}

// Squared error of x rounded to the nearest E2M1 value at scale s (brute force).
double nearest_sse(const float* x, double s) {
  double sse = 0;
  for (int i = 0; i < 32; ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (int c = 0; c < 16; ++c) best = std::min(best, std::pow(x[i] - s * e2m1(c), 2));
    sse += best;
  }
  return sse;
}

// Per block, no worse than nearest rounding at either power of two that puts
// the largest magnitude a in E2M1's top binade: 2^(floor(log2 a) - 2) (the OCP
// reference choice; a on 4..8, may clip) or twice that (a on 2..4).
TEST(Mxfp4, EncodeIsNoWorseThanNearestRoundingAtTheTopScales) {
  for (float spread : {0.02f, 1.0f, 300.0f}) {
    std::mt19937_64 rng(11);
    std::normal_distribution<float> dist(0.0f, spread);
    const int64_t nb = 256;
    std::vector<float> x(32 * nb);
    for (auto& v : x) v = dist(rng);
    for (int i = 0; i < 32 * 8; ++i) x[i] *= 1e-30f;  // some blocks near the subnormal end
    const auto bytes = encode(DType::MXFP4, x);
    const auto y = naive_decode(bytes.data(), nb);
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x.data() + 32 * b;
      double amax = 0, sse = 0;
      for (int i = 0; i < 32; ++i) {
        amax = std::max(amax, std::fabs(static_cast<double>(xb[i])));
        sse += std::pow(xb[i] - y[32 * b + i], 2);
      }
      const double s = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(amax))) - 2);
      const double bound = std::min(nearest_sse(xb, s), nearest_sse(xb, 2 * s));
      ASSERT_LE(sse, bound * (1 + 1e-9) + 1e-300) << "spread " << spread << " block " << b;
      // And no element further than half a step at the larger scale (the
      // widest E2M1 gap, 4 -> 6, is 2 steps): |err| <= 2 * s.
      for (int i = 0; i < 32; ++i)
        ASSERT_LE(std::fabs(xb[i] - y[32 * b + i]), 2 * s * (1 + 1e-9)) << b << " " << i;
    }
  }
}

// Zeros stay zero; values that are exactly representable come back exactly;
// non-finite and extreme inputs give finite values.
TEST(Mxfp4, ExactAndDegenerateBlocks) {
  const std::vector<float> zeros(64, 0.0f);
  for (float v : decode_bytes(DType::MXFP4, encode(DType::MXFP4, zeros), 64)) ASSERT_EQ(v, 0.0f);
  std::vector<float> exact(32);
  for (int i = 0; i < 32; ++i) exact[i] = static_cast<float>(e2m1(i % 16) * 0.25);
  EXPECT_EQ(decode_bytes(DType::MXFP4, encode(DType::MXFP4, exact), 32), exact);
  std::vector<float> odd(32, 1.0f);
  odd[3] = std::numeric_limits<float>::quiet_NaN();
  odd[5] = std::numeric_limits<float>::infinity();
  odd[9] = -3e38f;
  odd[12] = 1e-44f;
  for (float v : decode_bytes(DType::MXFP4, encode(DType::MXFP4, odd), 32))
    ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace pagellm
