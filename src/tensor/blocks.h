// Quantized block layouts, byte-compatible with GGUF/GGML files.
//
// Legacy 32-element blocks (x = element value, q = stored integer):
//   Q4_0  {f16 d; u8 qs[16]}           x = d * (q - 8); qs[j] low nibble = x[j], high = x[j+16]
//   Q4_1  {f16 d, m; u8 qs[16]}        x = d * q + m   (same nibble order)
//   Q5_0  {f16 d; u8 qh[4]; u8 qs[16]} q = nibble | bit j (j+16 for high) of qh << 4; x = d * (q -
//   16) Q5_1  {f16 d, m; u8 qh[4]; u8 qs[16]} x = d * q + m Q8_0  {f16 d; i8 qs[32]}           x =
//   d * q Q8_1  {f16 d, s; i8 qs[32]}        x = d * q, s = d * sum(q)
// K-quant 256-element super-blocks:
//   Q2_K  {u8 scales[16]; u8 qs[64]; f16 d, dmin}  16 sub-blocks of 16, 2-bit q, 4-bit scale/min
//   Q3_K  {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}  3-bit q, 6-bit signed scales
//   Q4_K  {f16 d, dmin; u8 scales[12]; u8 qs[128]}  8 sub-blocks of 32, 6-bit scale/min
//   Q5_K  {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
//   Q6_K  {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}  16 sub-blocks of 16, x = d * sc * (q - 32)
//   Q8_K  {f32 d; i8 qs[256]; i16 bsums[16]}  activations only; bsums = sums of 16 q's
// Non-linear 4-bit codes (q indexes kIq4NlValues; nibble order of Q4_0):
//   IQ4_NL  {f16 d; u8 qs[16]}  32 elements, x = d * kIq4NlValues[q]
//   IQ4_XS  {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}  256 elements, 8 sub-blocks of 32:
//           6-bit scale ls of sub-block s = nibble s%2 of scales_l[s/2] | bits 2s..2s+1 of
//           scales_h << 4; x = d * (ls - 32) * kIq4NlValues[q]; sub-block s's codes are
//           qs[16s..16s+16) (low nibble = element j, high = element j+16)
// Microscaling FP4 (OCP MX), as GGML stores it:
//   MXFP4   {u8 e; u8 qs[16]}  32 elements, x = 2^(e-127) * fp4(q), fp4 = E2M1 (sign, 2-bit
//           exponent, 1-bit mantissa: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives); nibble order
//           of Q4_0. Stored doubled as int8 (kMxfp4Values) times a halved scale
//           (mxfp4_half_scale), so the codes multiply as integers. No alignment (17 bytes).
#pragma once

#include <cstdint>

namespace pagellm {

using f16_t = uint16_t;   // IEEE half, stored bits
using bf16_t = uint16_t;  // bfloat16, stored bits

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
constexpr int QK4_NL = 32;
constexpr int QK_MXFP4 = 32;
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

struct BlockQ4_0 {
  f16_t d;
  uint8_t qs[QK4_0 / 2];
};
struct BlockQ4_1 {
  f16_t d, m;
  uint8_t qs[QK4_1 / 2];
};
struct BlockQ5_0 {
  f16_t d;
  uint8_t qh[4];
  uint8_t qs[QK5_0 / 2];
};
struct BlockQ5_1 {
  f16_t d, m;
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
};
struct BlockQ8_0 {
  f16_t d;
  int8_t qs[QK8_0];
};
struct BlockQ8_1 {
  f16_t d, s;
  int8_t qs[QK8_1];
};
struct BlockQ2_K {
  uint8_t scales[QK_K / 16];
  uint8_t qs[QK_K / 4];
  f16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[QK_K / 8];
  uint8_t qs[QK_K / 4];
  uint8_t scales[12];
  f16_t d;
};
struct BlockQ4_K {
  f16_t d, dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};
struct BlockQ5_K {
  f16_t d, dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  f16_t d;
};
struct BlockIQ4_NL {
  f16_t d;
  uint8_t qs[QK4_NL / 2];
};
struct BlockIQ4_XS {
  f16_t d;
  uint16_t scales_h;
  uint8_t scales_l[QK_K / 64];
  uint8_t qs[QK_K / 2];
};
// The sixteen values of IQ4_NL / IQ4_XS codes, ascending.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
struct BlockMXFP4 {
  uint8_t e;  // E8M0 shared exponent: 2^(e - 127)
  uint8_t qs[QK_MXFP4 / 2];
};
// Twice the E2M1 value of each code (code 8 is -0).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// Half the block scale, 2^(e - 128), as a float (exact: e = 0 and 1 are the
// subnormals 2^-128 and 2^-127; e = 255 is 2^127, not NaN, as GGML reads it).
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
// IQ4_XS sub-block s's scale, ls - 32 (-32..31).
inline int iq4_xs_scale(const BlockIQ4_XS& b, int s) {
  const int lo = (b.scales_l[s / 2] >> (4 * (s % 2))) & 15;
  const int hi = (b.scales_h >> (2 * s)) & 3;
  return (lo | (hi << 4)) - 32;
}
struct BlockQ8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockMXFP4) == 17);

}  // namespace pagellm
