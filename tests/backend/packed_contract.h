// The Rows16 kernels' contract (matmul_packed*.cpp), written out
// independently of the kernels from the row-major blocks of each type's
// format (tensor/blocks.h, ggml's layouts): what packed_matmul_test checks
// every variant against bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace pagellm::cpu::packed_contract {

// The 5-bit codes of a Q5_0 / Q5_1 block: the fifth bit of element e is bit
// e of qh (little-endian, ggml's layout).
template <class B>
inline int q5_code(const B& blk, int e) {
  const uint32_t qh = static_cast<uint32_t>(blk.qh[0]) | blk.qh[1] << 8 | blk.qh[2] << 16 |
                      static_cast<uint32_t>(blk.qh[3]) << 24;
  const int nib = e < 16 ? blk.qs[e] & 15 : blk.qs[e - 16] >> 4;
  return nib + 16 * static_cast<int>((qh >> e) & 1);
}

// Element e's code of a Q4_0 / Q4_1 block.
template <class B>
inline int q4_code(const B& blk, int e) {
  return e < 16 ? blk.qs[e] & 15 : blk.qs[e - 16] >> 4;
}

// The published value table of IQ4_NL / IQ4_XS codes.
constexpr int kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4 (OCP MX): twice the E2M1 value of a code (sign, 2-bit exponent, 1-bit
// mantissa), and half the E8M0 scale 2^(e - 127), computed in double.
inline int mxfp4_doubled(int code) {
  const int exp = (code >> 1) & 3, man = code & 1;
  const int twice = exp == 0 ? man : (2 + man) << (exp - 1);
  return code & 8 ? -twice : twice;
}
inline float mxfp4_half(uint8_t e) {
  return static_cast<float>(std::ldexp(1.0, e - 128));
}

// The contract, written out independently of the kernels from the row-major
// weights and the activation blocks of the type (XB: Q8_0, or Q8_1 whose
// codes and d are Q8_0's): acc = fma(float(exact block dot), d_w * d_x, acc)
// over the blocks in order, and for the types with a min (Q4_1, Q5_1) then
// acc = fma(float(sum of the block's activation codes), m_w * d_x, acc).
template <class XB>
inline float expected_dot(DType t, const uint8_t* wrow, const XB* xb, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int32_t I = 0, sum_x = 0;
    float dw, mw = 0;
    for (int e = 0; e < 32; ++e) sum_x += xb[b].qs[e];
    // A nibble-type block: element e's weight is code(blk, e) - offset.
    auto nibble_block = [&](const auto& blk, auto code, int offset) {
      for (int e = 0; e < 32; ++e) I += (code(blk, e) - offset) * xb[b].qs[e];
      dw = fp16_to_fp32(blk.d);
      if constexpr (requires { blk.m; }) mw = fp16_to_fp32(blk.m);
    };
    if (t == DType::Q4_0) {
      nibble_block(reinterpret_cast<const BlockQ4_0*>(wrow)[b], q4_code<BlockQ4_0>, 8);
    } else if (t == DType::Q4_1) {
      nibble_block(reinterpret_cast<const BlockQ4_1*>(wrow)[b], q4_code<BlockQ4_1>, 0);
    } else if (t == DType::Q5_0) {
      nibble_block(reinterpret_cast<const BlockQ5_0*>(wrow)[b], q5_code<BlockQ5_0>, 16);
    } else if (t == DType::Q5_1) {
      nibble_block(reinterpret_cast<const BlockQ5_1*>(wrow)[b], q5_code<BlockQ5_1>, 0);
    } else if (t == DType::IQ4_NL) {
      const auto& blk = reinterpret_cast<const BlockIQ4_NL*>(wrow)[b];
      for (int e = 0; e < 32; ++e) I += kValues[q4_code(blk, e)] * xb[b].qs[e];
      dw = fp16_to_fp32(blk.d);
    } else if (t == DType::MXFP4) {
      const auto& blk = reinterpret_cast<const BlockMXFP4*>(wrow)[b];
      for (int e = 0; e < 32; ++e) I += mxfp4_doubled(q4_code(blk, e)) * xb[b].qs[e];
      dw = mxfp4_half(blk.e);
    } else {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(wrow) + b;
      for (int j = 0; j < 32; ++j) I += blk->qs[j] * xb[b].qs[j];
      dw = fp16_to_fp32(blk->d);
    }
    const float dx = fp16_to_fp32(xb[b].d);
    acc = std::fma(static_cast<float>(I), dw * dx, acc);
    if (t == DType::Q4_1 || t == DType::Q5_1)
      acc = std::fma(static_cast<float>(sum_x), mw * dx, acc);
  }
  return acc;
}

// IQ4_XS from its format (tensor/blocks.h): sub-block j's 6-bit scale ls =
// nibble j % 2 of scales_l[j / 2] | bits 2j..2j+1 of scales_h << 4, element
// 32j + l (l < 16) the low nibble of qs[16j + l], 32j + 16 + l the high one:
// acc = fma(float(sum_j (ls - 32) * I_j), d * d_x, acc) per super-block.
inline float expected_dot_iq4xs(const uint8_t* wrow, const BlockQ8_K* xb, int64_t n) {
  float acc = 0.0f;
  for (int64_t s = 0; s < n / 256; ++s) {
    const auto* blk = reinterpret_cast<const BlockIQ4_XS*>(wrow) + s;
    int32_t S = 0;
    for (int j = 0; j < 8; ++j) {
      const int ls =
          ((blk->scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((blk->scales_h >> (2 * j)) & 3) << 4);
      int32_t I = 0;
      for (int l = 0; l < 16; ++l) {
        const uint8_t v = blk->qs[16 * j + l];
        I += kValues[v & 15] * xb[s].qs[32 * j + l] + kValues[v >> 4] * xb[s].qs[32 * j + 16 + l];
      }
      S += (ls - 32) * I;
    }
    acc = std::fma(static_cast<float>(S), fp16_to_fp32(blk->d) * xb[s].d, acc);
  }
  return acc;
}

// Q4_K, or Q5_K (B) whose codes have a fifth bit: bit j of qh[l] for element
// 32j + l (ggml's layout).
template <class B>
inline float expected_dot_k4(const uint8_t* wrow, const BlockQ8_K* xb, int64_t n) {
  float acc = 0.0f;
  for (int64_t s = 0; s < n / 256; ++s) {
    const auto* blk = reinterpret_cast<const B*>(wrow) + s;
    int32_t S = 0, M = 0;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      pagellm::detail::unpack_scale_min_k4(blk->scales, j, &sc, &m);
      int32_t I = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t v = blk->qs[32 * (j / 2) + l];
        int code = j % 2 ? v >> 4 : v & 15;
        if constexpr (std::is_same_v<B, BlockQ5_K>) code += 16 * ((blk->qh[l] >> j) & 1);
        I += code * xb[s].qs[32 * j + l];
      }
      S += sc * I;
      M += m * (xb[s].bsums[2 * j] + xb[s].bsums[2 * j + 1]);
    }
    const float dx = xb[s].d;
    acc = std::fma(static_cast<float>(S), fp16_to_fp32(blk->d) * dx, acc);
    acc = std::fma(static_cast<float>(M), -(fp16_to_fp32(blk->dmin) * dx), acc);
  }
  return acc;
}

// The 6-bit code of element e of a row-major Q6_K block (ggml's layout).
inline int q6k_code(const BlockQ6_K& b, int e) {
  const int half = e / 128, m = (e % 128) / 32, l = e % 32;
  const uint8_t ql = b.ql[64 * half + l + 32 * (m % 2)];
  return (m < 2 ? ql & 15 : ql >> 4) | (((b.qh[32 * half + l] >> (2 * m)) & 3) << 4);
}

// Q3_K from its format (tensor/blocks.h): element e's low bits at qs[32 *
// (e / 128) + e % 32] >> 2 * ((e % 128) / 32), its high bit at bit 4 * (e /
// 128) + (e % 128) / 32 of hmask[e % 32], value low + 4 * high - 4; scale j's
// low 4 bits in the nibbles of bytes 0..7, top 2 bits at bits 2 * (j / 4) of
// byte 8 + j % 4, biased by 32.
inline int q3k_value(const BlockQ3_K& b, int e) {
  const int half = e / 128, m = (e % 128) / 32, l = e % 32;
  const int low = (b.qs[32 * half + l] >> (2 * m)) & 3;
  const int high = (b.hmask[l] >> (4 * half + m)) & 1;
  return low + 4 * high - 4;
}
inline int q3k_scale(const BlockQ3_K& b, int j) {
  const int lo = j < 8 ? b.scales[j] & 15 : b.scales[j - 8] >> 4;
  const int hi = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// Q2_K from its format: element e's code as Q3_K's low bits, sub-block j's
// byte scales[j] = scale | min << 4.
inline float expected_dot_q2k(const uint8_t* wrow, const BlockQ8_K* xb, int64_t n) {
  float acc = 0.0f;
  for (int64_t s = 0; s < n / 256; ++s) {
    BlockQ2_K blk;
    std::memcpy(&blk, wrow + s * sizeof blk, sizeof blk);
    int32_t S = 0, M = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t I = 0, X = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int code = (blk.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        I += code * xb[s].qs[e];
        X += xb[s].qs[e];
      }
      S += (blk.scales[j] & 15) * I;
      M += (blk.scales[j] >> 4) * X;
    }
    const float dx = xb[s].d;
    acc = std::fma(static_cast<float>(S), fp16_to_fp32(blk.d) * dx, acc);
    acc = std::fma(static_cast<float>(M), -(fp16_to_fp32(blk.dmin) * dx), acc);
  }
  return acc;
}

inline float expected_dot_q3k(const uint8_t* wrow, const BlockQ8_K* xb, int64_t n) {
  float acc = 0.0f;
  for (int64_t s = 0; s < n / 256; ++s) {
    BlockQ3_K blk;  // rows sit at odd offsets
    std::memcpy(&blk, wrow + s * sizeof blk, sizeof blk);
    int32_t S = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t I = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) I += q3k_value(blk, e) * xb[s].qs[e];
      S += q3k_scale(blk, j) * I;
    }
    acc = std::fma(static_cast<float>(S), fp16_to_fp32(blk.d) * xb[s].d, acc);
  }
  return acc;
}

inline float expected_dot_q6k(const uint8_t* wrow, const BlockQ8_K* xb, int64_t n) {
  float acc = 0.0f;
  for (int64_t s = 0; s < n / 256; ++s) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(wrow) + s;
    int32_t S = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t I = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) I += (q6k_code(*blk, e) - 32) * xb[s].qs[e];
      S += blk->scales[j] * I;
    }
    acc = std::fma(static_cast<float>(S), fp16_to_fp32(blk->d) * xb[s].d, acc);
  }
  return acc;
}

// The contract's value for weight row wrow and activation row xq (in the dot
// type, row-major blocks).
inline float contract(DType t, const uint8_t* wrow, const uint8_t* xq, int64_t n) {
  const auto* xk = reinterpret_cast<const BlockQ8_K*>(xq);
  if (t == DType::Q4_K) return expected_dot_k4<BlockQ4_K>(wrow, xk, n);
  if (t == DType::Q5_K) return expected_dot_k4<BlockQ5_K>(wrow, xk, n);
  if (t == DType::Q6_K) return expected_dot_q6k(wrow, xk, n);
  if (t == DType::Q3_K) return expected_dot_q3k(wrow, xk, n);
  if (t == DType::Q2_K) return expected_dot_q2k(wrow, xk, n);
  if (t == DType::IQ4_XS) return expected_dot_iq4xs(wrow, xk, n);
  if (t == DType::Q4_1 || t == DType::Q5_1)
    return expected_dot(t, wrow, reinterpret_cast<const BlockQ8_1*>(xq), n);
  return expected_dot(t, wrow, reinterpret_cast<const BlockQ8_0*>(xq), n);
}

}  // namespace pagellm::cpu::packed_contract
