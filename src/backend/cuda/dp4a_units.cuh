// The weight side of the int8 GEMV (gemv_q8.h), shared by its kernel and its
// host rendition (needs nvcc; compiled for the host too).
//
// A "unit" is the piece of a weight row that one thread expands and multiplies
// at a time against int8 activations (q8_activations.h):
//   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL  one 32-element block
//   Q6_K                                  32 elements, an eighth of a super-block
//   Q4_K, Q5_K                            64 elements: two 32-element sub-blocks
//                                         (one's codes are the low nibbles, the
//                                         other's the high nibbles of 32 bytes)
// Codes are held as bytes in 32-bit words, word i = elements 4i .. 4i + 3 of a
// 32-element piece, and multiplied with the activations' codes by dp4a (four
// byte products summed into an int32): exact integer sums per 32 (Q6_K: 16)
// elements, each scaled into the float accumulator in one fixed order. Block
// layouts: tensor/blocks.h.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/gemv_q8.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace pagellm::cuda::detail {

// c + the four signed byte products of a and b.
__host__ __device__ __forceinline__ int dp4a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int i = 0; i < 4; ++i)
    c += static_cast<int8_t>(static_cast<uint8_t>(a >> (8 * i))) *
         static_cast<int8_t>(static_cast<uint8_t>(b >> (8 * i)));
  return c;
#endif
}

// The 32 activation codes at p (16-byte aligned) as 8 words.
__host__ __device__ __forceinline__ void load_codes32(const int8_t* p, uint32_t (&x)[8]) {
#ifdef __CUDA_ARCH__
  const int4 a = reinterpret_cast<const int4*>(p)[0];
  const int4 b = reinterpret_cast<const int4*>(p)[1];
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
  x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
#else
  memcpy(x, p, 32);
#endif
}

// sum over i of dp4a(q[i], x[i]) for i in [I0, I1).
template <int I0, int I1>
__host__ __device__ __forceinline__ int dot_words(const uint32_t (&q)[8], const uint32_t (&x)[8]) {
  int s = 0;
#pragma unroll
  for (int i = I0; i < I1; ++i) s = dp4a(q[i], x[i], s);
  return s;
}

// Bit 4 of each byte of a word from 4 bits (bit i -> byte i): Q5's fifth bits.
__host__ __device__ __forceinline__ uint32_t spread_bit4(uint32_t h4) {
  return ((h4 & 1u) << 4) | ((h4 & 2u) << 11) | ((h4 & 4u) << 18) | ((h4 & 8u) << 25);
}

// The IQ4_NL values (as signed bytes) of the four codes in the low nibbles of
// a word's bytes: two 8-byte table halves selected by the code's low 3 bits,
// the half by its bit 3.
__host__ __device__ __forceinline__ uint32_t iq4_word(uint32_t codes) {
  uint32_t lo = 0, hi = 0;
#ifdef __CUDA_ARCH__
  const uint32_t sel =
      (codes & 0x7u) | ((codes >> 4) & 0x70u) | ((codes >> 8) & 0x700u) | ((codes >> 12) & 0x7000u);
  lo = __byte_perm(0xbfad9881u, 0xf6eaddcfu, sel);
  hi = __byte_perm(0x26190d01u, 0x71594535u, sel);
#else
  for (int i = 0; i < 4; ++i) {
    const uint32_t c = (codes >> (8 * i)) & 7u;
    lo |= select_byte(0xbfad9881u, 0xf6eaddcfu, c) << (8 * i);
    hi |= select_byte(0x26190d01u, 0x71594535u, c) << (8 * i);
  }
#endif
  const uint32_t upper = ((codes >> 3) & 0x01010101u) * 0xffu;  // bytes whose code is >= 8
  return (hi & upper) | (lo & ~upper);
}

// 6-bit codes q (bytes 0..63) as signed bytes q - 32: flipping bit 5 gives
// q - 32 for q >= 32; below, bits 6 and 7 must be set as well.
__host__ __device__ __forceinline__ uint32_t minus32_word(uint32_t q) {
  const uint32_t t = q ^ 0x20202020u;
  return t | ((t & 0x20202020u) * 6u);
}

// One vector's activation blocks.
struct ActRow {
  const int8_t* qs;
  const float* d;
  const int32_t* sum;
};

// The 32-element block types.
template <DType T>
struct Unit32 {
  static constexpr int kElems = 32;
  static constexpr int kPerBlock = 1;  // units per GGUF block
  static constexpr bool kHasMin = T == DType::Q4_1 || T == DType::Q5_1;
  // Codes offset by this much (their value is code - kOffset): Q4_0 8, Q5_0 16.
  static constexpr int kOffset = T == DType::Q4_0 ? 8 : T == DType::Q5_0 ? 16 : 0;
  using Block = std::conditional_t<
      T == DType::Q8_0, BlockQ8_0,
      std::conditional_t<
          T == DType::Q4_0, BlockQ4_0,
          std::conditional_t<
              T == DType::Q4_1, BlockQ4_1,
              std::conditional_t<T == DType::Q5_0, BlockQ5_0,
                                 std::conditional_t<T == DType::Q5_1, BlockQ5_1, BlockIQ4_NL>>>>>;
  static constexpr int kBlockBytes = sizeof(Block);

  uint32_t q[8];
  float d;
  float m;

  __host__ __device__ __forceinline__ void load(const uint8_t* row, int64_t u) {
    const Block* b = reinterpret_cast<const Block*>(row) + u;
    d = f16_to_f32(b->d);
    if constexpr (kHasMin) m = f16_to_f32(b->m);
    if constexpr (T == DType::Q8_0) {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] = load4(reinterpret_cast<const uint8_t*>(b->qs) + 4 * i);
    } else {
      // Element j < 16: low nibble of qs[j]; element 16 + j: its high nibble.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t raw = load4(b->qs + 4 * i);
        q[i] = raw & 0x0f0f0f0fu;
        q[4 + i] = (raw >> 4) & 0x0f0f0f0fu;
      }
      if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
        const uint32_t qh = load4(b->qh);  // bit j: element j's fifth bit
#pragma unroll
        for (int i = 0; i < 8; ++i) q[i] |= spread_bit4((qh >> (4 * i)) & 15u);
      }
      if constexpr (T == DType::IQ4_NL) {
#pragma unroll
        for (int i = 0; i < 8; ++i) q[i] = iq4_word(q[i]);
      }
    }
  }

  // acc + d_w d_x (S - offset * sum_x) [+ m_w d_x sum_x]: the block's exact
  // integer sum S, then one FMA per term.
  __host__ __device__ __forceinline__ float dot(const ActRow& x, int64_t u, float acc) const {
    uint32_t xw[8];
    load_codes32(x.qs + 32 * u, xw);
    const float dx = x.d[u];
    int s = dot_words<0, 8>(q, xw);
    if constexpr (kOffset != 0) s -= kOffset * x.sum[u];
    acc = fma_rn(PAGELLM_MUL_RN(d, dx), static_cast<float>(s), acc);
    if constexpr (kHasMin) acc = fma_rn(PAGELLM_MUL_RN(m, dx), static_cast<float>(x.sum[u]), acc);
    return acc;
  }
};

// Q4_K / Q5_K: unit p of a super-block is sub-blocks 2p (low nibbles of
// qs[32p .. 32p + 32)) and 2p + 1 (high nibbles); Q5_K adds bits 2p and
// 2p + 1 of qh[0 .. 32) as bit 4. Value: d sc_j code - dmin m_j.
template <DType T>
struct UnitK45 {
  static constexpr int kElems = 64;
  static constexpr int kPerBlock = 4;
  using Block = std::conditional_t<T == DType::Q4_K, BlockQ4_K, BlockQ5_K>;
  static constexpr int kBlockBytes = sizeof(Block);

  uint32_t q[2][8];
  float d, dmin;
  int sc[2], mn[2];

  __host__ __device__ __forceinline__ void load(const uint8_t* row, int64_t u) {
    const Block* b = reinterpret_cast<const Block*>(row) + u / 4;
    const int p = static_cast<int>(u % 4);
    d = f16_to_f32(b->d);
    dmin = f16_to_f32(b->dmin);
    scale_min_k4(b->scales, 2 * p, &sc[0], &mn[0]);
    scale_min_k4(b->scales, 2 * p + 1, &sc[1], &mn[1]);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t raw = load4(b->qs + 32 * p + 4 * i);
      q[0][i] = raw & 0x0f0f0f0fu;
      q[1][i] = (raw >> 4) & 0x0f0f0f0fu;
      if constexpr (T == DType::Q5_K) {
        const uint32_t h = load4(b->qh + 4 * i);
        q[0][i] |= ((h >> (2 * p)) & 0x01010101u) << 4;
        q[1][i] |= ((h >> (2 * p + 1)) & 0x01010101u) << 4;
      }
    }
  }

  // Per sub-block j (activation block 2u + j): acc + d d_x (sc_j S_j) -
  // dmin d_x (m_j sum_x), both integers exact.
  __host__ __device__ __forceinline__ float dot(const ActRow& x, int64_t u, float acc) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t blk = 2 * u + j;
      uint32_t xw[8];
      load_codes32(x.qs + 32 * blk, xw);
      const float dx = x.d[blk];
      const int s = dot_words<0, 8>(q[j], xw);
      acc = fma_rn(PAGELLM_MUL_RN(d, dx), static_cast<float>(sc[j] * s), acc);
      acc = fma_rn(-PAGELLM_MUL_RN(dmin, dx), static_cast<float>(mn[j] * x.sum[blk]), acc);
    }
    return acc;
  }
};

// Q6_K: unit k of a super-block is its 32 elements [32k, 32k + 32): half
// h = k / 4, quarter g = k % 4; low 4 bits in ql[64h + 32 (g & 1) ..], nibble
// g / 2; high 2 bits in qh[32h ..] at bit 2g; value d sc (code - 32), one
// int8 scale per 16 elements.
struct UnitQ6K {
  static constexpr int kElems = 32;
  static constexpr int kPerBlock = 8;
  static constexpr int kBlockBytes = sizeof(BlockQ6_K);

  uint32_t q[8];  // code - 32, signed bytes
  float d;
  int sc[2];

  __host__ __device__ __forceinline__ void load(const uint8_t* row, int64_t u) {
    const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(row) + u / 8;
    const int k = static_cast<int>(u % 8), h = k / 4, g = k % 4;
    d = f16_to_f32(b->d);
    sc[0] = b->scales[8 * h + 2 * g];
    sc[1] = b->scales[8 * h + 2 * g + 1];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t lo =
          (load4(b->ql + 64 * h + 32 * (g & 1) + 4 * i) >> (4 * (g >> 1))) & 0x0f0f0f0fu;
      const uint32_t hi = (load4(b->qh + 32 * h + 4 * i) >> (2 * g)) & 0x03030303u;
      q[i] = minus32_word(lo | (hi << 4));
    }
  }

  // acc + d d_x (sc_0 S_0 + sc_1 S_1), S_k the exact sums of 16 elements.
  __host__ __device__ __forceinline__ float dot(const ActRow& x, int64_t u, float acc) const {
    uint32_t xw[8];
    load_codes32(x.qs + 32 * u, xw);
    const int s = sc[0] * dot_words<0, 4>(q, xw) + sc[1] * dot_words<4, 8>(q, xw);
    return fma_rn(PAGELLM_MUL_RN(d, x.d[u]), static_cast<float>(s), acc);
  }
};

// Unit<T>: load(row, u) takes unit u of a weight row into registers;
// dot(x, u, acc) adds its product with the matching 32 (64) activations.
// kPerBlock units share a GGUF block of kBlockBytes bytes. (For the types of
// kHasUnit only.)
template <DType T>
using Unit = std::conditional_t<T == DType::Q6_K, UnitQ6K,
                                std::conditional_t<T == DType::Q4_K || T == DType::Q5_K,
                                                   UnitK45<T>, Unit32<T>>>;

// The types that have a Unit.
template <DType T>
constexpr bool kHasUnit = T == DType::Q8_0 || T == DType::Q4_0 || T == DType::Q4_1 ||
                          T == DType::Q5_0 || T == DType::Q5_1 || T == DType::IQ4_NL ||
                          T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;

// Calls f(TypeTag<T>{}) for the types that have a Unit; false for the others.
template <typename F>
bool dispatch_q8_type(DType t, F&& f) {
  bool taken = false;
  dispatch_weight_type(t, [&](auto tag) {
    if constexpr (kHasUnit<decltype(tag)::value>) {
      f(tag);
      taken = true;
    }
  });
  return taken;
}

// The host renditions' frame (gemv_q8_host, mmq_host): validate_q8_matmul
// (ConfigError messages start with `what`), then f(TypeTag<T>{}, row_bytes)
// for the weight type.
template <typename F>
void q8_host_rendition(const char* what, DType type, const void* w, int64_t rows, int64_t cols,
                       const Q8ActView& x, F&& f) {
  validate_q8_matmul(what, type, w, rows, cols, x);
  const size_t row_bytes = dtype_row_bytes(type, cols);
  dispatch_q8_type(type, [&](auto tag) { f(tag, row_bytes); });
}

}  // namespace pagellm::cuda::detail
