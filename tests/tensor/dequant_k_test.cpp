// Hand-built K-quant super-blocks with known bytes. Each test checks spot
// values worked out by hand, then every element against the per-element
// definition of the layout (blocks.h and the GGML format), written here by
// element index rather than in the decoder's loop order.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tensor/quant_test_util.h"

namespace pagellm {
namespace {

using namespace test;

TEST(DequantK, Q2_K) {
  std::vector<BlockQ2_K> b(2);
  // Block 0: d = 0.5, dmin = 1; sub-block s has scale s and min 15 - s;
  // every qs byte 0xe4 = 0b11'10'01'00, so the 2-bit value at shift 2k is k,
  // i.e. element i gets q = (i % 128) / 32.
  b[0].d = kHalfHalf;
  b[0].dmin = kHalfOne;
  for (int s = 0; s < 16; ++s) b[0].scales[s] = static_cast<uint8_t>(s | ((15 - s) << 4));
  std::memset(b[0].qs, 0xe4, sizeof(b[0].qs));
  // Block 1: negative d = -1 and dmin = -0.5; scale 1, min 2 everywhere
  // (byte 0x21); qs byte k = k.
  b[1].d = kHalfMinusOne;
  b[1].dmin = kHalfMinusHalf;
  std::memset(b[1].scales, 0x21, sizeof(b[1].scales));
  for (int k = 0; k < 64; ++k) b[1].qs[k] = static_cast<uint8_t>(k);

  const auto y = decode(DType::Q2_K, b);
  // Block 0: x = 0.5 * s * q - (15 - s).
  EXPECT_EQ(y[0], -15.0f);   // s 0, q 0
  EXPECT_EQ(y[40], -12.0f);  // s 2, q 1: 1 - 13
  EXPECT_EQ(y[100], 0.0f);   // s 6, q 3: 9 - 9
  EXPECT_EQ(y[130], -7.0f);  // s 8, q 0
  EXPECT_EQ(y[200], 9.0f);   // s 12, q 2: 12 - 3
  EXPECT_EQ(y[255], 22.5f);  // s 15, q 3: 22.5 - 0
  // Block 1: x = -1 * 1 * q + 0.5 * 2 = 1 - q.
  EXPECT_EQ(y[256 + 0], 1.0f);     // byte 0, shift 0: q 0
  EXPECT_EQ(y[256 + 1], 0.0f);     // byte 1, shift 0: q 1
  EXPECT_EQ(y[256 + 33], 1.0f);    // byte 1, shift 2: q 0
  EXPECT_EQ(y[256 + 159], -2.0f);  // byte 63, shift 0: q 3
  EXPECT_EQ(y[256 + 223], -2.0f);  // byte 63, shift 4: q 3
  EXPECT_EQ(y[256 + 255], 1.0f);   // byte 63, shift 6: q 0

  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk ? -1.0f : 0.5f, dmin = blk ? -0.5f : 1.0f;
    for (int i = 0; i < 256; ++i) {
      const uint8_t sc = b[blk].scales[i / 16];
      const int q = (b[blk].qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
      EXPECT_EQ(y[256 * blk + i], d * (sc & 15) * q - dmin * (sc >> 4)) << blk << ":" << i;
    }
  }
}

TEST(DequantK, Q3_K) {
  std::vector<BlockQ3_K> b(2);
  // Block 0: d = 0.25. Stored 6-bit scales 4 s + 2 for sub-block s, i.e.
  // signed scales 4 s - 30 = -30, -26, ..., 30. Low nibbles: bytes 0..7 hold
  // s (low) and s + 8 (high), both 2, 6, 10, 14, 2, ... -> 0x22 0x66 0xaa 0xee.
  // High 2-bit parts are 0 (s 0..3), 1 (4..7), 2 (8..11), 3 (12..15), at bits
  // 0, 2, 4, 6 of bytes 8..11 -> 0b11'10'01'00 = 0xe4.
  b[0].d = kHalfQuarter;
  const uint8_t sc0[12] = {0x22, 0x66, 0xaa, 0xee, 0x22, 0x66, 0xaa, 0xee, 0xe4, 0xe4, 0xe4, 0xe4};
  std::memcpy(b[0].scales, sc0, 12);
  std::memset(b[0].qs, 0xe4, sizeof(b[0].qs));  // low 2 bits of element i = (i % 128) / 32
  // hmask: bytes 0..15 = 0x0f, bytes 16..31 = 0xf0; a clear bit subtracts 4.
  for (int k = 0; k < 32; ++k) b[0].hmask[k] = k < 16 ? 0x0f : 0xf0;
  // Block 1: d = -2; all low nibbles 0 and high parts 3 -> stored 48, scale 16;
  // qs byte k = k; hmask all clear.
  b[1].d = kHalfMinusTwo;
  const uint8_t sc1[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  std::memcpy(b[1].scales, sc1, 12);
  for (int k = 0; k < 64; ++k) b[1].qs[k] = static_cast<uint8_t>(k);
  std::memset(b[1].hmask, 0, sizeof(b[1].hmask));

  const auto y = decode(DType::Q3_K, b);
  EXPECT_EQ(y[0], 0.0f);           // scale -30, low 0, bit set: q 0
  EXPECT_EQ(y[16], 26.0f);         // scale -26, low 0, hmask[16] bit 0 clear: q -4
  EXPECT_EQ(y[100], -4.5f);        // scale -6, low 3, hmask[4] bit 3 set: 0.25 * -6 * 3
  EXPECT_EQ(y[150], 0.0f);         // scale 6, low 0, hmask[22] bit 4 set
  EXPECT_EQ(y[200], -9.0f);        // scale 18, low 2, hmask[8] bit 6 clear: q -2
  EXPECT_EQ(y[255], 22.5f);        // scale 30, low 3, hmask[31] bit 7 set
  EXPECT_EQ(y[256 + 0], 128.0f);   // -2 * 16 * (0 - 4)
  EXPECT_EQ(y[256 + 159], 32.0f);  // byte 63, shift 0: low 3 -> -2 * 16 * -1

  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk ? -2.0f : 0.25f;
    const uint8_t* s = b[blk].scales;
    for (int i = 0; i < 256; ++i) {
      const int sub = i / 16;
      const int lo4 = sub < 8 ? (s[sub] & 15) : (s[sub - 8] >> 4);
      const int hi2 = (s[8 + sub % 4] >> (2 * (sub / 4))) & 3;
      const int scale = (lo4 | (hi2 << 4)) - 32;
      const int low = (b[blk].qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
      const bool high = (b[blk].hmask[i % 32] >> (i / 32)) & 1;
      const int q = low - (high ? 0 : 4);
      EXPECT_EQ(y[256 * blk + i], d * scale * q) << blk << ":" << i;
    }
  }
}

// Q4_K/Q5_K block 0 scale bytes for scales {1, 2, 3, 63, 20, 33, 48, 63} and
// mins {0, 5, 10, 63, 17, 40, 1, 62}:
//   bytes 0..3: scale j | (scale j+4 >> 4) << 6 = 0x41 0x82 0xc3 0xff
//   bytes 4..7: min j | (min j+4 >> 4) << 6    = 0x40 0x85 0x0a 0xff
//   bytes 8..11: (scale j+4 & 15) | (min j+4 & 15) << 4 = 0x14 0x81 0x10 0xef
const uint8_t kScalesK0[12] = {0x41, 0x82, 0xc3, 0xff, 0x40, 0x85,
                               0x0a, 0xff, 0x14, 0x81, 0x10, 0xef};
const int kSc0[8] = {1, 2, 3, 63, 20, 33, 48, 63};
const int kMin0[8] = {0, 5, 10, 63, 17, 40, 1, 62};
// Block 1: bytes 0..7 = 1 (scale 1 and min 1 for sub-blocks 0..3, top bits of
// 4..7 zero); bytes 8..11 = 0x32 (scale 2, min 3 for sub-blocks 4..7).
const uint8_t kScalesK1[12] = {1, 1, 1, 1, 1, 1, 1, 1, 0x32, 0x32, 0x32, 0x32};
const int kSc1[8] = {1, 1, 1, 1, 2, 2, 2, 2};
const int kMin1[8] = {1, 1, 1, 1, 3, 3, 3, 3};

TEST(DequantK, Q4_K) {
  std::vector<BlockQ4_K> b(2);
  b[0].d = kHalfOne;
  b[0].dmin = kHalfHalf;
  std::memcpy(b[0].scales, kScalesK0, 12);
  for (int k = 0; k < 128; ++k) b[0].qs[k] = static_cast<uint8_t>(k);
  b[1].d = kHalfMinusQuarter;
  b[1].dmin = kHalfMinusOne;
  std::memcpy(b[1].scales, kScalesK1, 12);
  std::memset(b[1].qs, 0xf0, sizeof(b[1].qs));  // low nibbles 0, high nibbles 15

  const auto y = decode(DType::Q4_K, b);
  // Block 0: x = scale * q - 0.5 * min.
  EXPECT_EQ(y[0], 0.0f);      // sub 0, byte 0 low: 0
  EXPECT_EQ(y[31], 15.0f);    // sub 0, byte 31 low: 15
  EXPECT_EQ(y[32], -2.5f);    // sub 1, byte 0 high: 0 - 2.5
  EXPECT_EQ(y[63], -0.5f);    // sub 1, byte 31 high: 2 * 1 - 2.5
  EXPECT_EQ(y[100], 94.5f);   // sub 3, byte 36 high (2): 63 * 2 - 31.5
  EXPECT_EQ(y[130], 31.5f);   // sub 4, byte 66 low (2): 20 * 2 - 8.5
  EXPECT_EQ(y[170], 112.0f);  // sub 5, byte 74 high (4): 33 * 4 - 20
  EXPECT_EQ(y[200], 383.5f);  // sub 6, byte 104 low (8): 48 * 8 - 0.5
  EXPECT_EQ(y[255], 410.0f);  // sub 7, byte 127 high (7): 63 * 7 - 31
  // Block 1: x = -0.25 * scale * q + min.
  EXPECT_EQ(y[256 + 0], 1.0f);     // sub 0, q 0
  EXPECT_EQ(y[256 + 40], -2.75f);  // sub 1, q 15: -3.75 + 1
  EXPECT_EQ(y[256 + 130], 3.0f);   // sub 4, q 0
  EXPECT_EQ(y[256 + 170], -4.5f);  // sub 5, q 15: -7.5 + 3

  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk ? -0.25f : 1.0f, dmin = blk ? -1.0f : 0.5f;
    const int* sc = blk ? kSc1 : kSc0;
    const int* mn = blk ? kMin1 : kMin0;
    for (int i = 0; i < 256; ++i) {
      const uint8_t byte = b[blk].qs[32 * (i / 64) + i % 32];
      const int q = (i % 64) < 32 ? (byte & 15) : (byte >> 4);
      const float dl = d * sc[i / 32], ml = dmin * mn[i / 32];
      EXPECT_EQ(y[256 * blk + i], dl * q - ml) << blk << ":" << i;
    }
  }
}

TEST(DequantK, Q5_K) {
  std::vector<BlockQ5_K> b(2);
  b[0].d = kHalfOne;
  b[0].dmin = kHalfHalf;
  std::memcpy(b[0].scales, kScalesK0, 12);
  for (int k = 0; k < 128; ++k) b[0].qs[k] = static_cast<uint8_t>(k);
  // Fifth bit of element i: bit i / 32 of qh[i % 32]. 0x55 for bytes 0..15
  // sets it in even sub-blocks, 0xaa for bytes 16..31 in odd ones.
  for (int k = 0; k < 32; ++k) b[0].qh[k] = k < 16 ? 0x55 : 0xaa;
  b[1].d = kHalfMinusQuarter;
  b[1].dmin = kHalfMinusOne;
  std::memcpy(b[1].scales, kScalesK1, 12);
  std::memset(b[1].qs, 0xf0, sizeof(b[1].qs));
  std::memset(b[1].qh, 0xff, sizeof(b[1].qh));  // low-nibble elements 16, high ones 31

  const auto y = decode(DType::Q5_K, b);
  EXPECT_EQ(y[0], 16.0f);           // sub 0, q 0 + 16
  EXPECT_EQ(y[31], 15.0f);          // sub 0, q 15, qh[31] = 0xaa bit 0 clear
  EXPECT_EQ(y[32], -2.5f);          // sub 1, q 0, qh[0] bit 1 clear
  EXPECT_EQ(y[48], 31.5f);          // sub 1, byte 16 high (1) + 16: 2 * 17 - 2.5
  EXPECT_EQ(y[255], 1418.0f);       // sub 7, 7 + 16: 63 * 23 - 31
  EXPECT_EQ(y[256 + 0], -3.0f);     // -0.25 * 1 * 16 + 1
  EXPECT_EQ(y[256 + 40], -6.75f);   // -0.25 * 1 * 31 + 1
  EXPECT_EQ(y[256 + 130], -5.0f);   // -0.25 * 2 * 16 + 3
  EXPECT_EQ(y[256 + 255], -12.5f);  // -0.25 * 2 * 31 + 3

  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk ? -0.25f : 1.0f, dmin = blk ? -1.0f : 0.5f;
    const int* sc = blk ? kSc1 : kSc0;
    const int* mn = blk ? kMin1 : kMin0;
    for (int i = 0; i < 256; ++i) {
      const uint8_t byte = b[blk].qs[32 * (i / 64) + i % 32];
      const int low4 = (i % 64) < 32 ? (byte & 15) : (byte >> 4);
      const int q = low4 + 16 * ((b[blk].qh[i % 32] >> (i / 32)) & 1);
      const float dl = d * sc[i / 32], ml = dmin * mn[i / 32];
      EXPECT_EQ(y[256 * blk + i], dl * q - ml) << blk << ":" << i;
    }
  }
}

TEST(DequantK, Q6_K) {
  std::vector<BlockQ6_K> b(2);
  // Block 0: d = 0.5; signed 8-bit sub-block scales incl. the extremes;
  // ql byte k = k; qh bytes 0xe4, so the top 2 bits of element i are
  // (i % 128) / 32.
  b[0].d = kHalfHalf;
  const int8_t sc0[16] = {1, -1, 2, -2, 3, -3, 4, -4, 127, -128, 10, -10, 0, 5, -5, 64};
  std::memcpy(b[0].scales, sc0, 16);
  for (int k = 0; k < 128; ++k) b[0].ql[k] = static_cast<uint8_t>(k);
  std::memset(b[0].qh, 0xe4, sizeof(b[0].qh));
  // Block 1: d = -0.25, scales 2; ql 0x0f, qh 0: elements with (i % 128) < 64
  // read the low nibble (15), the others the high nibble (0).
  b[1].d = kHalfMinusQuarter;
  std::memset(b[1].scales, 2, 16);
  std::memset(b[1].ql, 0x0f, sizeof(b[1].ql));
  std::memset(b[1].qh, 0, sizeof(b[1].qh));

  const auto y = decode(DType::Q6_K, b);
  // x = 0.5 * scale * (q - 32)
  EXPECT_EQ(y[0], -16.0f);        // scale 1, q 0
  EXPECT_EQ(y[17], 15.5f);        // scale -1, ql[17] low 1: -1 * -31 / 2
  EXPECT_EQ(y[40], -8.0f);        // scale 2, ql[40] low 8, top 1: q 24
  EXPECT_EQ(y[70], 0.0f);         // scale 3, ql[6] high 0, top 2: q 32
  EXPECT_EQ(y[127], -38.0f);      // scale -4, ql[63] high 3, top 3: q 51
  EXPECT_EQ(y[128], -2032.0f);    // scale 127, ql[64] low 0, top 0
  EXPECT_EQ(y[150], 1664.0f);     // scale -128, ql[86] low 6: q - 32 = -26
  EXPECT_EQ(y[200], 0.0f);        // scale 0
  EXPECT_EQ(y[255], 736.0f);      // scale 64, ql[127] high 7, top 3: q 55
  EXPECT_EQ(y[256 + 0], 8.5f);    // -0.25 * 2 * (15 - 32)
  EXPECT_EQ(y[256 + 64], 16.0f);  // -0.25 * 2 * (0 - 32)
  EXPECT_EQ(y[256 + 191], 8.5f);
  EXPECT_EQ(y[256 + 255], 16.0f);

  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk ? -0.25f : 0.5f;
    for (int i = 0; i < 256; ++i) {
      const int r = i % 128;
      const uint8_t lbyte = b[blk].ql[64 * (i / 128) + r % 64];
      const int low4 = r < 64 ? (lbyte & 15) : (lbyte >> 4);
      const int top2 = (b[blk].qh[32 * (i / 128) + r % 32] >> (2 * (r / 32))) & 3;
      const int q = (low4 | (top2 << 4)) - 32;
      EXPECT_EQ(y[256 * blk + i], d * b[blk].scales[i / 16] * q) << blk << ":" << i;
    }
  }
}

TEST(DequantK, Q8_K) {
  std::vector<BlockQ8_K> b(2);
  b[0].d = 0.1f;  // a float, not a half
  for (int j = 0; j < 256; ++j) b[0].qs[j] = static_cast<int8_t>(j - 128);
  b[1].d = -2.5f;
  for (int j = 0; j < 256; ++j) b[1].qs[j] = static_cast<int8_t>(j % 2 ? -1 : 127);
  // bsums only serve dot products; decoding must not depend on them.
  for (int g = 0; g < 16; ++g) b[0].bsums[g] = b[1].bsums[g] = 12345;

  const auto y = decode(DType::Q8_K, b);
  EXPECT_FLOAT_EQ(y[0], -12.8f);
  EXPECT_EQ(y[128], 0.0f);
  EXPECT_FLOAT_EQ(y[255], 12.7f);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], 0.1f * static_cast<float>(j - 128)) << j;
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[256 + j], j % 2 ? 2.5f : -317.5f) << j;
}

}  // namespace
}  // namespace pagellm
