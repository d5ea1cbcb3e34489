// Portable reference dot products (CpuIsa::Scalar). Quantized types: each block
// (or K-quant super-block) is reduced exactly in integers, then scaled and
// added to one float accumulator in block order. Float types: 8 interleaved
// partial sums (element i goes to sum i % 8), combined pairwise at the end.
#include <cstring>
#include <type_traits>

#include "backend/cpu/dot_kernels.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"

namespace pagellm::cpu::detail {

namespace {

inline float f16(f16_t h) {
  return fp16_to_fp32(h);
}

// ---- float weights (activations are f32) --------------------------------------

template <class Load>
float dot_float(int64_t n, const uint8_t* w, const float* x) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += Load::get(w, i + k) * x[i + k];
  for (int k = 0; i < n; ++i, ++k) acc[k] += Load::get(w, i) * x[i];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

struct LoadF32 {
  static float get(const uint8_t* w, int64_t i) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    return v;
  }
};
struct LoadF16 {
  static float get(const uint8_t* w, int64_t i) {
    f16_t v;
    std::memcpy(&v, w + 2 * i, 2);
    return fp16_to_fp32(v);
  }
};
struct LoadBF16 {
  static float get(const uint8_t* w, int64_t i) {
    bf16_t v;
    std::memcpy(&v, w + 2 * i, 2);
    return bf16_to_fp32(v);
  }
};

// ---- legacy 32-element blocks -------------------------------------------------

float dot_q4_0(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockQ4_0*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_0*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK4_0; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += ((w[b].qs[j] & 15) - 8) * x[b].qs[j] + ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + 16];
    acc += (f16(w[b].d) * f16(x[b].d)) * static_cast<float>(isum);
  }
  return acc;
}

float dot_q4_1(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockQ4_1*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_1*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK4_1; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += (w[b].qs[j] & 15) * x[b].qs[j] + (w[b].qs[j] >> 4) * x[b].qs[j + 16];
    acc += (f16(w[b].d) * f16(x[b].d)) * static_cast<float>(isum) + f16(w[b].m) * f16(x[b].s);
  }
  return acc;
}

inline uint32_t qh_bits(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

float dot_q5_0(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockQ5_0*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_0*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK5_0; ++b) {
    uint32_t qh = qh_bits(w[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      int lo = (w[b].qs[j] & 15) | (((qh >> j) & 1) << 4);
      int hi = (w[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      isum += (lo - 16) * x[b].qs[j] + (hi - 16) * x[b].qs[j + 16];
    }
    acc += (f16(w[b].d) * f16(x[b].d)) * static_cast<float>(isum);
  }
  return acc;
}

float dot_q5_1(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockQ5_1*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_1*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK5_1; ++b) {
    uint32_t qh = qh_bits(w[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      int lo = (w[b].qs[j] & 15) | (((qh >> j) & 1) << 4);
      int hi = (w[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      isum += lo * x[b].qs[j] + hi * x[b].qs[j + 16];
    }
    acc += (f16(w[b].d) * f16(x[b].d)) * static_cast<float>(isum) + f16(w[b].m) * f16(x[b].s);
  }
  return acc;
}

float dot_q8_0(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockQ8_0*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_0*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += w[b].qs[j] * x[b].qs[j];
    acc += (f16(w[b].d) * f16(x[b].d)) * static_cast<float>(isum);
  }
  return acc;
}

// ---- non-linear 4-bit codes -----------------------------------------------------

// sum of table[code] * y over the 32 elements of 16 nibble bytes (low nibble =
// element j, high = element j + 16); table is kIq4NlValues or kMxfp4Values.
inline int iq4_group(const uint8_t* qs, const int8_t* y, const int8_t* table = kIq4NlValues) {
  int isum = 0;
  for (int j = 0; j < 16; ++j) isum += table[qs[j] & 15] * y[j] + table[qs[j] >> 4] * y[j + 16];
  return isum;
}

float dot_iq4_nl(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockIQ4_NL*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_0*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK4_NL; ++b)
    acc += (f16(w[b].d) * f16(x[b].d)) * static_cast<float>(iq4_group(w[b].qs, x[b].qs));
  return acc;
}

float dot_mxfp4(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockMXFP4*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_0*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK_MXFP4; ++b)
    acc += (mxfp4_half_scale(w[b].e) * f16(x[b].d)) *
           static_cast<float>(iq4_group(w[b].qs, x[b].qs, kMxfp4Values));
  return acc;
}

// ---- K-quants (256-element super-blocks, Q8_K activations) ----------------------

// Adds one super-block: d * dx * isum - dmin * dx * msum.
inline float kblock(float acc, float d, float dmin, float dx, int isum, int msum) {
  return acc + ((d * dx) * static_cast<float>(isum) - (dmin * dx) * static_cast<float>(msum));
}

float dot_q2_k(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockQ2_K*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int isum = 0, msum = 0;
    for (int s = 0; s < 16; ++s) {  // sub-block s: elements 16s..16s+16
      const int half = s / 8, shift = 2 * ((s % 8) / 2), off = 16 * (s % 2);
      const uint8_t* q = w[b].qs + 32 * half + off;
      const int8_t* y = x[b].qs + 16 * s;
      int sub = 0;
      for (int l = 0; l < 16; ++l) sub += ((q[l] >> shift) & 3) * y[l];
      isum += (w[b].scales[s] & 15) * sub;
      msum += (w[b].scales[s] >> 4) * x[b].bsums[s];
    }
    acc = kblock(acc, f16(w[b].d), f16(w[b].dmin), x[b].d, isum, msum);
  }
  return acc;
}

// The sixteen 6-bit Q3_K scales, minus 32.
inline void q3_k_scales(const uint8_t* s, int* out) {
  for (int j = 0; j < 16; ++j) {
    int lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = (lo | (hi << 4)) - 32;
  }
}

float dot_q3_k(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockQ3_K*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int sc[16];
    q3_k_scales(w[b].scales, sc);
    int isum = 0;
    for (int s = 0; s < 16; ++s) {
      const int half = s / 8, j = (s % 8) / 2, off = 16 * (s % 2);
      const uint8_t* q = w[b].qs + 32 * half + off;
      const uint8_t* hm = w[b].hmask + off;
      const int hbit = 4 * half + j;
      const int8_t* y = x[b].qs + 16 * s;
      int sub = 0;
      for (int l = 0; l < 16; ++l) {
        int v = ((q[l] >> (2 * j)) & 3) - (((hm[l] >> hbit) & 1) ? 0 : 4);
        sub += v * y[l];
      }
      isum += sc[s] * sub;
    }
    acc = kblock(acc, f16(w[b].d), 0.0f, x[b].d, isum, 0);
  }
  return acc;
}

// The eight 6-bit scales and mins of Q4_K/Q5_K.
inline void k4_scales(const uint8_t* s, int* sc, int* mn) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      sc[j] = s[j] & 63;
      mn[j] = s[j + 4] & 63;
    } else {
      sc[j] = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
      mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
  }
}

// Q4_K, and with kQ5 Q5_K (whose codes gain the fifth bit from qh).
template <class Block, bool kQ5 = std::is_same_v<Block, BlockQ5_K>>
float dot_k4(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const Block*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int sc[8], mn[8];
    k4_scales(w[b].scales, sc, mn);
    int isum = 0, msum = 0;
    for (int s = 0; s < 8; ++s) {  // sub-block s: elements 32s..32s+32
      const uint8_t* q = w[b].qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      const int8_t* y = x[b].qs + 32 * s;
      int sub = 0;
      for (int l = 0; l < 32; ++l) {
        int code = (q[l] >> shift) & 15;
        if constexpr (kQ5) code |= ((w[b].qh[l] >> s) & 1) << 4;
        sub += code * y[l];
      }
      isum += sc[s] * sub;
      msum += mn[s] * (x[b].bsums[2 * s] + x[b].bsums[2 * s + 1]);
    }
    acc = kblock(acc, f16(w[b].d), f16(w[b].dmin), x[b].d, isum, msum);
  }
  return acc;
}

float dot_q6_k(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockQ6_K*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int isum = 0;
    for (int s = 0; s < 16; ++s) {  // sub-block s: elements 16s..16s+16
      const int half = s / 8, part = (s % 8) / 2, off = 16 * (s % 2);
      const uint8_t* ql = w[b].ql + 64 * half + 32 * (part % 2) + off;
      const uint8_t* qh = w[b].qh + 32 * half + off;
      const int lshift = 4 * (part / 2), hshift = 2 * part;
      const int8_t* y = x[b].qs + 16 * s;
      int sub = 0;
      for (int l = 0; l < 16; ++l) {
        int v = (((ql[l] >> lshift) & 15) | (((qh[l] >> hshift) & 3) << 4)) - 32;
        sub += v * y[l];
      }
      isum += w[b].scales[s] * sub;
    }
    acc = kblock(acc, f16(w[b].d), 0.0f, x[b].d, isum, 0);
  }
  return acc;
}

float dot_iq4_xs(int64_t n, const uint8_t* wp, const uint8_t* xp) {
  const auto* w = reinterpret_cast<const BlockIQ4_XS*>(wp);
  const auto* x = reinterpret_cast<const BlockQ8_K*>(xp);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int isum = 0;
    for (int s = 0; s < 8; ++s)  // sub-block s: elements 32s..32s+32
      isum += iq4_xs_scale(w[b], s) * iq4_group(w[b].qs + 16 * s, x[b].qs + 32 * s);
    acc = kblock(acc, f16(w[b].d), 0.0f, x[b].d, isum, 0);
  }
  return acc;
}

using RowDotFn = float (*)(int64_t n, const uint8_t* w, const uint8_t* x);

template <RowDotFn F>
void tile(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const uint8_t* x, size_t xs,
          int64_t cols, float* out, int64_t os) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) out[c * os + r] = F(n, w + r * ws, x + c * xs);
}

template <class Load>
float dot_float_bytes(int64_t n, const uint8_t* w, const uint8_t* x) {
  return dot_float<Load>(n, w, reinterpret_cast<const float*>(x));
}

}  // namespace

DotTileFn scalar_dot_tile(DType wtype) {
  switch (wtype) {
    case DType::F32:
      return tile<dot_float_bytes<LoadF32>>;
    case DType::F16:
      return tile<dot_float_bytes<LoadF16>>;
    case DType::BF16:
      return tile<dot_float_bytes<LoadBF16>>;
    case DType::Q4_0:
      return tile<dot_q4_0>;
    case DType::Q4_1:
      return tile<dot_q4_1>;
    case DType::Q5_0:
      return tile<dot_q5_0>;
    case DType::Q5_1:
      return tile<dot_q5_1>;
    case DType::Q8_0:
      return tile<dot_q8_0>;
    case DType::Q2_K:
      return tile<dot_q2_k>;
    case DType::Q3_K:
      return tile<dot_q3_k>;
    case DType::Q4_K:
      return tile<dot_k4<BlockQ4_K>>;
    case DType::Q5_K:
      return tile<dot_k4<BlockQ5_K>>;
    case DType::Q6_K:
      return tile<dot_q6_k>;
    case DType::IQ4_NL:
      return tile<dot_iq4_nl>;
    case DType::IQ4_XS:
      return tile<dot_iq4_xs>;
    case DType::MXFP4:
      return tile<dot_mxfp4>;
    default:
      return nullptr;
  }
}

}  // namespace pagellm::cpu::detail
