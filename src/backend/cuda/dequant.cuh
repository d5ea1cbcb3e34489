// Dequantization of GGUF weight rows in the CUDA kernels (needs nvcc; also
// compiled for the host, where dequantize_row_host in gemv.h runs it so tests
// check the layouts without a GPU).
//
// The primitive is a "quad": elements [4k, 4k + 4) of a row, k = 0 .. cols/4.
// Consecutive quads are consecutive in x, so the GEMV's lanes, striding over
// quads, read x and the weight blocks coalesced: a warp's 32 quads are 128
// elements, four 32-element blocks side by side. GEMM's expansion to f16 and
// the embedding gather also give each thread a quad, so their writes are
// coalesced too.
//
// Block layouts: tensor/blocks.h. The arithmetic per element is the CPU's
// (tensor/quant_*.cpp), in the same order: the expansion is bit for bit.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cuda/device_common.cuh"
#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace pagellm::cuda::detail {

constexpr int kQuad = 4;  // elements per dequantization quad

// Q4_K / Q5_K 6-bit scale and min of sub-block j (tensor/quant_internal.h).
__host__ __device__ __forceinline__ void scale_min_k4(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K's 6-bit scale of sub-block j (of 16), bias removed (tensor/quant_internal.h).
__host__ __device__ __forceinline__ int scale_q3_k(const uint8_t* s, int j) {
  const int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
  const int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
  return (lo | (hi << 4)) - 32;
}

// Byte i (0..7) of the 8 bytes {lo, hi} (little-endian): __byte_perm on the
// device, the same selection spelled out on the host.
__host__ __device__ __forceinline__ uint32_t select_byte(uint32_t lo, uint32_t hi, uint32_t i) {
#ifdef __CUDA_ARCH__
  return __byte_perm(lo, hi, i) & 0xffu;
#else
  return ((i < 4 ? lo : hi) >> (8 * (i & 3))) & 0xffu;
#endif
}

// kIq4NlValues[q] (tensor/blocks.h) from four words of registers: a table in
// memory would be a host array (not visible to device code), and one in
// __constant__ memory serializes when the lanes of a warp read different codes.
__host__ __device__ __forceinline__ int iq4_value(uint32_t q) {
  const uint32_t b = q < 8 ? select_byte(0xbfad9881u, 0xf6eaddcfu, q & 7)
                           : select_byte(0x26190d01u, 0x71594535u, q & 7);
  return static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(b)));
}

// The 4 bytes at p (2-byte aligned, as every field of every block is) as a
// little-endian word, in two 16-bit loads.
__host__ __device__ __forceinline__ uint32_t load4(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
#else
  uint32_t v;
  memcpy(&v, p, 4);  // the host is little-endian x86-64, as the GPU
  return v;
#endif
}

__host__ __device__ __forceinline__ uint32_t byte_of(uint32_t word, int i) {
  return (word >> (8 * i)) & 0xffu;
}

// The 4 bytes at p (any alignment: MXFP4's 17-byte blocks) as a word.
__host__ __device__ __forceinline__ uint32_t load4_bytes(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// kMxfp4Values[q] (twice the E2M1 value) from registers, as iq4_value does.
__host__ __device__ __forceinline__ int mxfp4_value(uint32_t q) {
  const uint32_t b = q < 8 ? select_byte(0x03020100u, 0x0c080604u, q & 7)
                           : select_byte(0xfdfeff00u, 0xf4f8fafcu, q & 7);
  return static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(b)));
}

// mxfp4_half_scale (tensor/blocks.h): 2^(e - 128) from the float's bits.
__host__ __device__ __forceinline__ float mxfp4_half_scale_bits(uint32_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, 4);
  return f;
#endif
}

// w[0..4) = elements [4k, 4k + 4) of the row at `row` (GGUF layout).
template <DType T>
__host__ __device__ __forceinline__ void dequant_quad(const uint8_t* row, int64_t k,
                                                      float (&w)[kQuad]) {
  if constexpr (T == DType::F32) {
    const float* p = reinterpret_cast<const float*>(row) + 4 * k;
#ifdef __CUDA_ARCH__
    if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      w[0] = v.x;
      w[1] = v.y;
      w[2] = v.z;
      w[3] = v.w;
      return;
    }
#endif
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = p[i];
  } else if constexpr (T == DType::F16 || T == DType::BF16) {
    const uint8_t* p = row + 8 * k;
    uint32_t lo, hi;
#ifdef __CUDA_ARCH__
    if ((reinterpret_cast<uintptr_t>(p) & 7) == 0) {
      const uint2 v = *reinterpret_cast<const uint2*>(p);
      lo = v.x;
      hi = v.y;
    } else {
      lo = load4(p);
      hi = load4(p + 4);
    }
#else
    lo = load4(p);
    hi = load4(p + 4);
#endif
    const uint16_t h[4] = {static_cast<uint16_t>(lo & 0xffffu), static_cast<uint16_t>(lo >> 16),
                           static_cast<uint16_t>(hi & 0xffffu), static_cast<uint16_t>(hi >> 16)};
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = T == DType::F16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
  } else if constexpr (T == DType::Q8_0) {
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + k / 8;
    const int c = static_cast<int>(k % 8);
    const float d = f16_to_f32(b->d);
    const uint32_t q = load4(reinterpret_cast<const uint8_t*>(b->qs) + 4 * c);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = d * static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(byte_of(q, i))));
  } else if constexpr (T == DType::MXFP4) {
    // Q4_0's nibble order in a 17-byte block {e, qs[16]}: byte loads.
    const uint8_t* b = row + static_cast<size_t>(k / 8) * sizeof(BlockMXFP4);
    const int c = static_cast<int>(k % 8);
    const float d = mxfp4_half_scale_bits(b[0]);
    const uint32_t q = (load4_bytes(b + 1 + 4 * (c % 4)) >> (c < 4 ? 0 : 4)) & 0x0f0f0f0fu;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = PAGELLM_MUL_RN(d, static_cast<float>(mxfp4_value(byte_of(q, i))));
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0 ||
                       T == DType::Q5_1 || T == DType::IQ4_NL) {
    // Quad c of a 32-element block: c < 4 the low nibbles of qs[4c ..],
    // c >= 4 the high nibbles of qs[4(c - 4) ..]; Q5's fifth bit of element
    // 4c + i is bit 4c + i of qh either way.
    using Block = std::conditional_t<
        T == DType::Q4_0, BlockQ4_0,
        std::conditional_t<
            T == DType::Q4_1, BlockQ4_1,
            std::conditional_t<T == DType::Q5_0, BlockQ5_0,
                               std::conditional_t<T == DType::Q5_1, BlockQ5_1, BlockIQ4_NL>>>>;
    const Block* b = reinterpret_cast<const Block*>(row) + k / 8;
    const int c = static_cast<int>(k % 8);
    const float d = f16_to_f32(b->d);
    const uint32_t q = (load4(b->qs + 4 * (c % 4)) >> (c < 4 ? 0 : 4)) & 0x0f0f0f0fu;
    [[maybe_unused]] uint32_t hbits = 0;
    if constexpr (T == DType::Q5_0 || T == DType::Q5_1) hbits = (load4(b->qh) >> (4 * c)) & 15u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int v = static_cast<int>(byte_of(q, i) | (((hbits >> i) & 1u) << 4));
      if constexpr (T == DType::Q4_0) {
        w[i] = d * static_cast<float>(v - 8);
      } else if constexpr (T == DType::Q5_0) {
        w[i] = PAGELLM_MUL_RN(d, static_cast<float>(v - 16));
      } else if constexpr (T == DType::IQ4_NL) {
        w[i] = PAGELLM_MUL_RN(d, static_cast<float>(iq4_value(static_cast<uint32_t>(v))));
      } else {
        w[i] = PAGELLM_ADD_RN(PAGELLM_MUL_RN(d, static_cast<float>(v)), f16_to_f32(b->m));
      }
    }
  } else {
    // The 256-element super-blocks: quad kk of super-block k / 64 is in
    // 32-element sub-block j = kk / 8, at offset l = 4 (kk % 8) in it.
    const int kk = static_cast<int>(k % 64), j = kk / 8, l = 4 * (kk % 8);
    if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
      // 2-bit fields at bit 2 (j % 4) of qs[32 (j / 4) + l ..], sub-blocks of
      // 16 (scale 2j + l / 16); Q3_K's high bit is bit j of hmask[l] (set: no -4).
      using Block = std::conditional_t<T == DType::Q2_K, BlockQ2_K, BlockQ3_K>;
      const Block* b = reinterpret_cast<const Block*>(row) + k / 64;
      const uint32_t q = (load4(b->qs + 32 * (j / 4) + l) >> (2 * (j % 4))) & 0x03030303u;
      const float d = f16_to_f32(b->d);
      if constexpr (T == DType::Q2_K) {
        const uint32_t sc = b->scales[2 * j + l / 16];
        const float dl = PAGELLM_MUL_RN(d, static_cast<float>(sc & 0x0f));
        const float ml = PAGELLM_MUL_RN(f16_to_f32(b->dmin), static_cast<float>(sc >> 4));
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[i] = PAGELLM_SUB_RN(PAGELLM_MUL_RN(dl, static_cast<float>(byte_of(q, i))), ml);
      } else {
        const float dl =
            PAGELLM_MUL_RN(d, static_cast<float>(scale_q3_k(b->scales, 2 * j + l / 16)));
        const uint32_t hm = load4(b->hmask + l) >> j;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int v = static_cast<int>(byte_of(q, i)) - ((byte_of(hm, i) & 1u) ? 0 : 4);
          w[i] = PAGELLM_MUL_RN(dl, static_cast<float>(v));
        }
      }
    } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
      // Low (even j) or high nibbles of qs[32 (j / 2) + l ..], 6-bit scale and
      // min; Q5_K adds bit j of qh[l].
      using Block = std::conditional_t<T == DType::Q4_K, BlockQ4_K, BlockQ5_K>;
      const Block* b = reinterpret_cast<const Block*>(row) + k / 64;
      int sc, m;
      scale_min_k4(b->scales, j, &sc, &m);
      const float d1 = f16_to_f32(b->d) * static_cast<float>(sc);
      const float m1 = f16_to_f32(b->dmin) * static_cast<float>(m);
      const uint32_t q = (load4(b->qs + 32 * (j / 2) + l) >> (4 * (j & 1))) & 0x0f0f0f0fu;
      [[maybe_unused]] uint32_t hb = 0;
      if constexpr (T == DType::Q5_K) hb = (load4(b->qh + l) >> j) & 0x01010101u;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t v = byte_of(q, i) | (byte_of(hb, i) << 4);
        w[i] = PAGELLM_SUB_RN(PAGELLM_MUL_RN(d1, static_cast<float>(v)), m1);
      }
    } else if constexpr (T == DType::Q6_K) {
      // Sub-block j: half j / 4, quarter g = j % 4 of it; low 4 bits in
      // ql[64 half + 32 (g & 1) + l], nibble g / 2; high 2 bits in
      // qh[32 half + l] at bit 2g; scale of the 16 elements l / 16.
      const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(row) + k / 64;
      const int half = j / 4, g = j % 4;
      const uint32_t lo =
          (load4(b->ql + 64 * half + 32 * (g & 1) + l) >> (4 * (g >> 1))) & 0x0f0f0f0fu;
      const uint32_t hi = (load4(b->qh + 32 * half + l) >> (2 * g)) & 0x03030303u;
      const float dsc = PAGELLM_MUL_RN(f16_to_f32(b->d),
                                       static_cast<float>(b->scales[8 * half + 2 * g + l / 16]));
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int q = static_cast<int>(byte_of(lo, i) | (byte_of(hi, i) << 4)) - 32;
        w[i] = PAGELLM_MUL_RN(dsc, static_cast<float>(q));
      }
    } else {
      static_assert(T == DType::IQ4_XS);
      // Sub-block j's codes: qs[16 j + l % 16 ..], low nibbles for l < 16.
      const BlockIQ4_XS* b = reinterpret_cast<const BlockIQ4_XS*>(row) + k / 64;
      const int ls =
          (((b->scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((b->scales_h >> (2 * j)) & 3) << 4)) -
          32;
      const float d = PAGELLM_MUL_RN(f16_to_f32(b->d), static_cast<float>(ls));
      const uint32_t q = (load4(b->qs + 16 * j + l % 16) >> (l < 16 ? 0 : 4)) & 0x0f0f0f0fu;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        w[i] = PAGELLM_MUL_RN(d, static_cast<float>(iq4_value(byte_of(q, i))));
    }
  }
}

template <DType T>
using TypeTag = std::integral_constant<DType, T>;

// Calls f(TypeTag<T>{}) for the runtime type t (f reads the type back as
// decltype(tag)::value); false if t is not one of the types the CUDA kernels
// dequantize: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K,
// IQ4_NL, IQ4_XS, MXFP4.
template <typename F>
bool dispatch_weight_type(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      f(TypeTag<DType::F32>{});
      return true;
    case DType::F16:
      f(TypeTag<DType::F16>{});
      return true;
    case DType::BF16:
      f(TypeTag<DType::BF16>{});
      return true;
    case DType::Q8_0:
      f(TypeTag<DType::Q8_0>{});
      return true;
    case DType::Q4_0:
      f(TypeTag<DType::Q4_0>{});
      return true;
    case DType::Q4_1:
      f(TypeTag<DType::Q4_1>{});
      return true;
    case DType::Q5_0:
      f(TypeTag<DType::Q5_0>{});
      return true;
    case DType::Q5_1:
      f(TypeTag<DType::Q5_1>{});
      return true;
    case DType::Q2_K:
      f(TypeTag<DType::Q2_K>{});
      return true;
    case DType::Q3_K:
      f(TypeTag<DType::Q3_K>{});
      return true;
    case DType::Q4_K:
      f(TypeTag<DType::Q4_K>{});
      return true;
    case DType::Q5_K:
      f(TypeTag<DType::Q5_K>{});
      return true;
    case DType::Q6_K:
      f(TypeTag<DType::Q6_K>{});
      return true;
    case DType::IQ4_NL:
      f(TypeTag<DType::IQ4_NL>{});
      return true;
    case DType::IQ4_XS:
      f(TypeTag<DType::IQ4_XS>{});
      return true;
    case DType::MXFP4:
      f(TypeTag<DType::MXFP4>{});
      return true;
    default:
      return false;
  }
}

}  // namespace pagellm::cuda::detail
