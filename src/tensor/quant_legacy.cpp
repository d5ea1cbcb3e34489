// Legacy 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//
// In the 4- and 5-bit formats byte j of qs holds element j in its low nibble
// and element j + 16 in its high nibble; the fifth bit of element j is bit j
// of the little-endian 32-bit qh.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace pagellm::detail {

namespace {

// Truncates v toward zero after clamping it to [0, hi]; NaN gives 0.
inline int trunc_clamped(float v, int hi) {
  v = v > 0.0f ? v : 0.0f;
  v = v < static_cast<float>(hi) ? v : static_cast<float>(hi);
  return static_cast<int>(v);
}

// std::round (ties away from zero) for |v| < 2^22, branch-light: round to
// nearest even, then move exact ties that went toward zero one step away.
inline int round_half_away(float v) {
  int r = nearest_int(v);
  const float diff = v - static_cast<float>(r);
  if (diff == 0.5f && v > 0.0f) ++r;
  if (diff == -0.5f && v < 0.0f) --r;
  return r;
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // blocks are little-endian, as is every supported host
  return v;
}

inline void store_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}

void min_max(const float* x, int n, float* lo, float* hi) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
  }
  *lo = mn;
  *hi = mx;
}

}  // namespace

// ---- decoding ----

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK4_0) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      y[j] = d * static_cast<float>((x[i].qs[j] & 0x0f) - 8);
      y[j + QK4_0 / 2] = d * static_cast<float>((x[i].qs[j] >> 4) - 8);
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK4_1) {
    const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      y[j] = d * static_cast<float>(x[i].qs[j] & 0x0f) + m;
      y[j + QK4_1 / 2] = d * static_cast<float>(x[i].qs[j] >> 4) + m;
    }
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK5_0) {
    const float d = fp16_to_fp32(x[i].d);
    const uint32_t qh = load_u32(x[i].qh);
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int lo = (x[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (x[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(lo - 16);
      y[j + QK5_0 / 2] = d * static_cast<float>(hi - 16);
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK5_1) {
    const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
    const uint32_t qh = load_u32(x[i].qh);
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int lo = (x[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (x[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(lo) + m;
      y[j + QK5_1 / 2] = d * static_cast<float>(hi) + m;
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK8_0) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK8_0; ++j) y[j] = d * static_cast<float>(x[i].qs[j]);
  }
}

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK8_1) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK8_1; ++j) y[j] = d * static_cast<float>(x[i].qs[j]);
  }
}

// ---- encoding ----
//
// Symmetric formats (Q4_0, Q5_0) map the element of largest magnitude to the
// most negative level exactly: d = max / -(levels/2), so that value decodes
// to itself and the opposite extreme clamps one step short. Affine formats
// (Q4_1, Q5_1) span [min, max] with d = (max - min) / (levels - 1). Both round
// half up, as (int)(v + 0.5) on a non-negative v.

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
    const float d = signed_absmax(x, QK4_0) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int lo = trunc_clamped(x[j] * id + 8.5f, 15);
      const int hi = trunc_clamped(x[j + QK4_0 / 2] * id + 8.5f, 15);
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

namespace {

// Q4_1/Q5_1's block header from its range: d = (max - min) / top, m = min.
// Returns 1 / d (0 for a constant block) and the min.
template <class Block>
float affine_header(const float* x, int n, float top, Block& b, float* mn) {
  float mx;
  min_max(x, n, mn, &mx);
  const float d = (mx - *mn) / top;
  b.d = fp32_to_fp16(d);
  b.m = fp32_to_fp16(*mn);
  return d != 0.0f ? 1.0f / d : 0.0f;
}

}  // namespace

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
    float mn;
    const float id = affine_header(x, QK4_1, 15.0f, y[i], &mn);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const int lo = trunc_clamped((x[j] - mn) * id + 0.5f, 15);
      const int hi = trunc_clamped((x[j + QK4_1 / 2] - mn) * id + 0.5f, 15);
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
    const float d = signed_absmax(x, QK5_0) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int lo = trunc_clamped(x[j] * id + 16.5f, 31);
      const int hi = trunc_clamped(x[j + QK5_0 / 2] * id + 16.5f, 31);
      y[i].qs[j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + 16);
    }
    store_u32(y[i].qh, qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
    float mn;
    const float id = affine_header(x, QK5_1, 31.0f, y[i], &mn);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int lo = trunc_clamped((x[j] - mn) * id + 0.5f, 31);
      const int hi = trunc_clamped((x[j + QK5_1 / 2] - mn) * id + 0.5f, 31);
      y[i].qs[j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + 16);
    }
    store_u32(y[i].qh, qh);
  }
}

namespace {

// Q8_0/Q8_1 core: d = amax / 127, q = round(x / d) (half away from zero).
// Returns the exact (unrounded) d and the sum of the q's.
float quantize_8bit(const float* x, int8_t* qs, int n, int* qsum) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int j = 0; j < n; ++j) {
    // |x * id| <= 127 by construction; the clamp only guards NaN/inf input.
    qs[j] = static_cast<int8_t>(clamp_int(round_half_away(x[j] * id), -127, 127));
    sum += qs[j];
  }
  *qsum = sum;
  return d;
}

}  // namespace

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
    int sum;
    y[i].d = fp32_to_fp16(quantize_8bit(x, y[i].qs, QK8_0, &sum));
  }
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
    int sum;
    const float d = quantize_8bit(x, y[i].qs, QK8_1, &sum);
    y[i].d = fp32_to_fp16(d);
    y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

}  // namespace pagellm::detail
