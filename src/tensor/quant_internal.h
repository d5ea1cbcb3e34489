// Internal to the tensor layer: per-type block codecs used by convert.cpp,
// and small numeric helpers shared by the quantizers.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/blocks.h"

namespace pagellm::detail {

// Rounds to the nearest integer, ties to even, for |v| < 2^22: adding 1.5 * 2^23
// pushes the integer part into the low mantissa bits. NaN gives garbage but no UB.
inline int nearest_int(float v) {
  float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// The element of largest magnitude, with its sign (the first one on ties); 0 for
// an all-zero span.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    float a = x[i] < 0 ? -x[i] : x[i];
    if (a > amax) {
      amax = a;
      max = x[i];
    }
  }
  return max;
}

// Legacy 32-element blocks (quant_legacy.cpp). `nb` is the number of blocks.
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb);
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb);

// K-quant 256-element super-blocks: decoding and Q8_K (quant_k.cpp).
void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb);
void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb);
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb);
void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb);

// K-quant encoders with per-sub-block scale search (quant_k_encode.cpp).
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb);

// Non-linear 4-bit codes (quant_iq4.cpp).
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb);
void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb);
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb);

// Microscaling FP4 (quant_mxfp4.cpp).
void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb);
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb);

// Q4_K/Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes:
// sub-blocks 0..3 keep theirs in the low 6 bits of bytes 0..3 (scale) and 4..7
// (min); sub-blocks 4..7 keep their low 4 bits in the nibbles of bytes 8..11
// (scale low, min high) and their top 2 bits in bits 6..7 of bytes 0..7.
inline void unpack_scale_min_k4(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K's sixteen 6-bit scales (stored with a +32 bias) in 12 bytes: low 4 bits
// in the nibbles of bytes 0..7 (sub-blocks 0..7 low nibble, 8..15 high
// nibble), top 2 bits of sub-block j at bits 2*(j/4) of byte 8 + j%4.
inline int unpack_scale_q3_k(const uint8_t* s, int j) {
  int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
  int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace pagellm::detail
