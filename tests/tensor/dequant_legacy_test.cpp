// Hand-built legacy blocks with known bytes: the expected values are worked
// out by hand from the documented layout (blocks.h), not produced by the
// code under test.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tensor/quant_test_util.h"

namespace pagellm {
namespace {

using namespace test;

void expect_values(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
}

TEST(DequantLegacy, Q4_0) {
  std::vector<BlockQ4_0> b(2);
  // Block 0: d = 0.5; byte j = j (low nibble, element j) | (15 - j) << 4 (element j + 16).
  b[0].d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b[0].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  // Block 1: d = -2; every byte 0xf0 (elements j: q = 0, j + 16: q = 15), except byte 3 = 0x8f.
  b[1].d = kHalfMinusTwo;
  std::memset(b[1].qs, 0xf0, 16);
  b[1].qs[3] = 0x8f;

  std::vector<float> want = {// block 0, elements 0..15: 0.5 * (j - 8)
                             -4, -3.5, -3, -2.5, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5,
                             // block 0, elements 16..31: 0.5 * ((15 - j) - 8)
                             3.5, 3, 2.5, 2, 1.5, 1, 0.5, 0, -0.5, -1, -1.5, -2, -2.5, -3, -3.5,
                             -4};
  // block 1: low nibble 0 -> -2 * (0 - 8) = 16, high nibble 15 -> -2 * 7 = -14.
  for (int j = 0; j < 16; ++j) want.push_back(16);
  for (int j = 0; j < 16; ++j) want.push_back(-14);
  want[32 + 3] = -14;  // byte 3 low nibble 15
  want[32 + 19] = 0;   // byte 3 high nibble 8
  expect_values(decode(DType::Q4_0, b), want);
}

TEST(DequantLegacy, Q4_1) {
  std::vector<BlockQ4_1> b(2);
  // Block 0: d = 0.25, m = -1; same nibble ramp as above.
  b[0].d = kHalfQuarter;
  b[0].m = kHalfMinusOne;
  for (int j = 0; j < 16; ++j) b[0].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  // Block 1: d = 1.5, m = 10; every byte 0x21: low nibble 1, high nibble 2.
  b[1].d = kHalfOneAndHalf;
  b[1].m = kHalfTen;
  std::memset(b[1].qs, 0x21, 16);

  std::vector<float> want = {
      // 0.25 * j - 1
      -1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75,
      // 0.25 * (15 - j) - 1
      2.75, 2.5, 2.25, 2, 1.75, 1.5, 1.25, 1, 0.75, 0.5, 0.25, 0, -0.25, -0.5, -0.75, -1};
  for (int j = 0; j < 16; ++j) want.push_back(11.5f);  // 1.5 * 1 + 10
  for (int j = 0; j < 16; ++j) want.push_back(13.0f);  // 1.5 * 2 + 10
  expect_values(decode(DType::Q4_1, b), want);
}

TEST(DequantLegacy, Q5_0) {
  std::vector<BlockQ5_0> b(2);
  // Block 0: d = 1; nibble ramp; qh bytes {0x01, 0x80, 0x00, 0xff} = 0xff008001:
  // bit 0 (element 0), bit 15 (element 15), bits 24..31 (elements 24..31).
  b[0].d = kHalfOne;
  for (int j = 0; j < 16; ++j) b[0].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const uint8_t qh0[4] = {0x01, 0x80, 0x00, 0xff};
  std::memcpy(b[0].qh, qh0, 4);
  // Block 1: d = -0.5; bytes 0x0f (low 15, high 0); qh = 0x0000ffff (all low halves).
  b[1].d = kHalfMinusHalf;
  std::memset(b[1].qs, 0x0f, 16);
  const uint8_t qh1[4] = {0xff, 0xff, 0x00, 0x00};
  std::memcpy(b[1].qh, qh1, 4);

  std::vector<float> want = {
      // elements 0..15: (j | hi << 4) - 16; element 0 -> 16 - 16, element 15 -> 31 - 16
      0, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, 15,
      // elements 16..23: (15 - j) - 16; elements 24..31: (15 - j) + 16 - 16
      -1, -2, -3, -4, -5, -6, -7, -8, 7, 6, 5, 4, 3, 2, 1, 0};
  for (int j = 0; j < 16; ++j) want.push_back(-7.5f);  // -0.5 * (31 - 16)
  for (int j = 0; j < 16; ++j) want.push_back(8.0f);   // -0.5 * (0 - 16)
  expect_values(decode(DType::Q5_0, b), want);
}

TEST(DequantLegacy, Q5_1) {
  std::vector<BlockQ5_1> b(2);
  // Block 0: d = 0.5, m = -8; ramp; qh = 0x800000aa: bits 1, 3, 5, 7 and 31.
  b[0].d = kHalfHalf;
  b[0].m = kHalfMinusEight;
  for (int j = 0; j < 16; ++j) b[0].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const uint8_t qh0[4] = {0xaa, 0x00, 0x00, 0x80};
  std::memcpy(b[0].qh, qh0, 4);
  // Block 1: d = 2, m = 1; every level 31.
  b[1].d = kHalfTwo;
  b[1].m = kHalfOne;
  std::memset(b[1].qs, 0xff, 16);
  std::memset(b[1].qh, 0xff, 4);

  std::vector<float> want = {
      // 0.5 * (j + 16 * bit j) - 8
      -8, 0.5, -7, 1.5, -6, 2.5, -5, 3.5, -4, -3.5, -3, -2.5, -2, -1.5, -1, -0.5,
      // 0.5 * ((15 - j) + 16 * bit (16 + j)) - 8; only element 31 has its bit
      -0.5, -1, -1.5, -2, -2.5, -3, -3.5, -4, -4.5, -5, -5.5, -6, -6.5, -7, -7.5, 0};
  for (int j = 0; j < 32; ++j) want.push_back(63.0f);  // 2 * 31 + 1
  expect_values(decode(DType::Q5_1, b), want);
}

TEST(DequantLegacy, Q8_0) {
  std::vector<BlockQ8_0> b(2);
  b[0].d = kHalfEighth;
  for (int j = 0; j < 32; ++j) b[0].qs[j] = static_cast<int8_t>(j - 16);
  b[1].d = kHalfMinusThree;
  for (int j = 0; j < 32; ++j) b[1].qs[j] = static_cast<int8_t>(j % 2 ? -128 : 127);

  std::vector<float> want = {-2, -1.875, -1.75, -1.625, -1.5, -1.375, -1.25, -1.125,
                             -1, -0.875, -0.75, -0.625, -0.5, -0.375, -0.25, -0.125,
                             0,  0.125,  0.25,  0.375,  0.5,  0.625,  0.75,  0.875,
                             1,  1.125,  1.25,  1.375,  1.5,  1.625,  1.75,  1.875};
  for (int j = 0; j < 32; ++j) want.push_back(j % 2 ? 384.0f : -381.0f);  // -3 * -128, -3 * 127
  expect_values(decode(DType::Q8_0, b), want);
}

TEST(DequantLegacy, Q8_1) {
  std::vector<BlockQ8_1> b(2);
  // s (= d * sum q) is for dot products only; decoding ignores it, so give it junk.
  b[0].d = kHalfHalf;
  b[0].s = 0x1234;
  for (int j = 0; j < 32; ++j) b[0].qs[j] = static_cast<int8_t>(3 * j - 40);
  b[1].d = kHalfMinusSixteenth;
  b[1].s = kHalfZero;
  for (int j = 0; j < 32; ++j) b[1].qs[j] = static_cast<int8_t>(-j);

  std::vector<float> want = {-20,  -18.5, -17,  -15.5, -14, -12.5, -11, -9.5, -8,  -6.5, -5,
                             -3.5, -2,    -0.5, 1,     2.5, 4,     5.5, 7,    8.5, 10,   11.5,
                             13,   14.5,  16,   17.5,  19,  20.5,  22,  23.5, 25,  26.5};
  for (int j = 0; j < 32; ++j) want.push_back(static_cast<float>(j) / 16);  // -1/16 * -j
  expect_values(decode(DType::Q8_1, b), want);
}

TEST(DequantLegacy, RowSpansBlocks) {
  // A 3-block Q8_0 row decodes block after block.
  std::vector<BlockQ8_0> b(3);
  const f16_t ds[3] = {kHalfOne, kHalfMinusOne, kHalfTwo};
  for (int i = 0; i < 3; ++i) {
    b[i].d = ds[i];
    for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(i + 1);
  }
  const auto got = decode(DType::Q8_0, b);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(got[j], 1.0f);
    EXPECT_EQ(got[32 + j], -2.0f);
    EXPECT_EQ(got[64 + j], 6.0f);
  }
}

}  // namespace
}  // namespace pagellm
