#include "backend/cpu/activation_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/kernel_test_util.h"
#include "tensor/blocks.h"
#include "tensor/convert.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm::cpu {
namespace {

using test::random_floats;

TEST(ActivationQuant, DotTypes) {
  EXPECT_EQ(dot_type(DType::F32), DType::F32);
  EXPECT_EQ(dot_type(DType::F16), DType::F32);
  EXPECT_EQ(dot_type(DType::BF16), DType::F32);
  EXPECT_EQ(dot_type(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(dot_type(DType::Q5_0), DType::Q8_0);
  EXPECT_EQ(dot_type(DType::Q8_0), DType::Q8_0);
  EXPECT_EQ(dot_type(DType::Q4_1), DType::Q8_1);
  EXPECT_EQ(dot_type(DType::Q5_1), DType::Q8_1);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    EXPECT_EQ(dot_type(t), DType::Q8_K);
  EXPECT_THROW(dot_type(DType::Q8_K), Error);
  EXPECT_THROW(dot_type(DType::Q8_1), Error);
}

TEST(ActivationQuant, RowBytes) {
  EXPECT_EQ(activation_row_bytes(DType::F16, 7), 28u);
  EXPECT_EQ(activation_row_bytes(DType::Q4_0, 64), 2 * sizeof(BlockQ8_0));
  EXPECT_EQ(activation_row_bytes(DType::Q5_1, 32), sizeof(BlockQ8_1));
  EXPECT_EQ(activation_row_bytes(DType::Q6_K, 512), 2 * sizeof(BlockQ8_K));
  EXPECT_THROW(activation_row_bytes(DType::Q4_K, 32), Error);
}

// Rows with features that stress the quantizer: an all-zero block, tiny and
// huge magnitudes, exact ties (x / d = k + 0.5), a single nonzero element.
std::vector<float> tricky_row(int64_t n, uint64_t seed) {
  auto x = random_floats(static_cast<size_t>(n), seed);
  for (int64_t i = 0; i < n; ++i) {
    int64_t blk = i / 32;
    if (blk % 5 == 1) x[i] = 0.0f;
    if (blk % 5 == 2) x[i] *= 1e-6f;
    if (blk % 5 == 3) x[i] *= 1e4f;
    if (blk % 5 == 4) x[i] = (i % 32 == 0) ? 127.0f : static_cast<float>((i % 7) - 3) + 0.5f;
  }
  return x;
}

TEST(ActivationQuant, AllVariantsProduceIdenticalBytes) {
  for (DType w : {DType::Q4_0, DType::Q4_1, DType::Q4_K}) {
    for (int64_t n : {256, 1024, 4096}) {
      auto x = tricky_row(n, 7 + n);
      const size_t bytes = activation_row_bytes(w, n);
      std::vector<uint8_t> ref(bytes);
      quantize_activation_row(w, x.data(), ref.data(), n, CpuIsa::Scalar);
      for (CpuIsa isa : available_isas()) {
        std::vector<uint8_t> got(bytes, 0x55);
        quantize_activation_row(w, x.data(), got.data(), n, isa);
        EXPECT_EQ(std::memcmp(ref.data(), got.data(), bytes), 0)
            << dtype_name(w) << " n=" << n << " " << isa_name(isa);
      }
    }
  }
}

// Largest |x| in the 32-element block holding element i.
float block_amax(const std::vector<float>& x, int64_t i) {
  float m = 0.0f;
  for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) m = std::fmax(m, std::fabs(x[j]));
  return m;
}

// Allowed |x - dequantized| for an f16 step d: half a step, plus what clamping
// to +-127 loses when d underflowed in f16 (blocks with max |x| below ~1e-5).
float q8_tolerance(float d, float amax) {
  return 0.5f * d * 1.0001f + std::fmax(0.0f, amax - 127.5f * d) + 1e-30f;
}

// Dequantizing gives x back within half a step, and the side fields (Q8_1 s,
// Q8_K bsums) are consistent with the codes.
TEST(ActivationQuant, RoundTripWithinHalfStep) {
  const int64_t n = 1024;
  auto x = tricky_row(n, 3);
  for (CpuIsa isa : available_isas()) {
    {  // Q8_0
      std::vector<BlockQ8_0> q(n / 32);
      quantize_activation_row(DType::Q4_0, x.data(), q.data(), n, isa);
      std::vector<float> y(n);
      dequantize_row(DType::Q8_0, q.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        float d = fp16_to_fp32(q[i / 32].d);
        ASSERT_LE(std::fabs(x[i] - y[i]), q8_tolerance(d, block_amax(x, i))) << i;
        ASSERT_GE(q[i / 32].qs[i % 32], -127);
      }
    }
    {  // Q8_1
      std::vector<BlockQ8_1> q(n / 32);
      quantize_activation_row(DType::Q5_1, x.data(), q.data(), n, isa);
      std::vector<float> y(n);
      dequantize_row(DType::Q8_1, q.data(), y.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        float d = fp16_to_fp32(q[b].d);
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
          ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]),
                    q8_tolerance(d, block_amax(x, b * 32)));
          sum += q[b].qs[j];
        }
        EXPECT_EQ(q[b].s, fp32_to_fp16(d * static_cast<float>(sum))) << b;
      }
    }
    {  // Q8_K
      std::vector<BlockQ8_K> q(n / 256);
      quantize_activation_row(DType::Q6_K, x.data(), q.data(), n, isa);
      std::vector<float> y(n);
      dequantize_row(DType::Q8_K, q.data(), y.data(), n);
      for (int64_t b = 0; b < n / 256; ++b) {
        for (int j = 0; j < 256; ++j)
          ASSERT_LE(std::fabs(x[b * 256 + j] - y[b * 256 + j]), 0.5f * q[b].d * 1.0001f + 1e-30f);
        for (int g = 0; g < 16; ++g) {
          int s = 0;
          for (int j = 0; j < 16; ++j) s += q[b].qs[16 * g + j];
          EXPECT_EQ(q[b].bsums[g], s);
        }
      }
    }
  }
}

TEST(ActivationQuant, ZeroRowIsAllZero) {
  std::vector<float> x(256, 0.0f);
  for (CpuIsa isa : available_isas()) {
    BlockQ8_K q;
    std::memset(&q, 0x7f, sizeof(q));
    quantize_activation_row(DType::Q4_K, x.data(), &q, 256, isa);
    EXPECT_EQ(q.d, 0.0f);
    for (int j = 0; j < 256; ++j) EXPECT_EQ(q.qs[j], 0);
    for (int g = 0; g < 16; ++g) EXPECT_EQ(q.bsums[g], 0);
  }
}

TEST(ActivationQuant, FloatWeightsCopy) {
  auto x = random_floats(19, 1);
  std::vector<float> y(19);
  quantize_activation_row(DType::F16, x.data(), y.data(), 19);
  EXPECT_EQ(x, y);
}

TEST(ActivationQuant, RejectsPartialBlocks) {
  std::vector<float> x(300);
  std::vector<uint8_t> dst(4096);
  EXPECT_THROW(quantize_activation_row(DType::Q4_K, x.data(), dst.data(), 300), Error);
  EXPECT_THROW(quantize_activation_row(DType::Q8_0, x.data(), dst.data(), 33), Error);
}

}  // namespace
}  // namespace pagellm::cpu
