// Device-side helpers shared by the .cu files of this folder (not a public
// header: it needs nvcc). Dequantization works on "units" of 32 consecutive
// elements of a GGUF row, the common divisor of every supported block size,
// with the same arithmetic, in the same order, as tensor/quant_*.cpp.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace pagellm::cuda::detail {

constexpr int kUnit = 32;  // elements per dequantization unit

// The dequantization below is __host__ __device__: the same code also runs on
// the host (dequantize_row_host in gemv.h), so its layouts are tested without
// a GPU. On the device, the _rn intrinsics keep nvcc from fusing a*b+c.
#ifdef __CUDA_ARCH__
#define PAGELLM_MUL_RN(a, b) __fmul_rn(a, b)
#define PAGELLM_ADD_RN(a, b) __fadd_rn(a, b)
#define PAGELLM_SUB_RN(a, b) __fsub_rn(a, b)
#else
#define PAGELLM_MUL_RN(a, b) ((a) * (b))
#define PAGELLM_ADD_RN(a, b) ((a) + (b))
#define PAGELLM_SUB_RN(a, b) ((a) - (b))
#endif

__host__ __device__ __forceinline__ float f16_to_f32(uint16_t h) {
  __half_raw r;
  r.x = h;
  return __half2float(__half(r));
}
__device__ __forceinline__ uint16_t f32_to_f16(float f) {
  return __half_as_ushort(__float2half_rn(f));  // nearest even, as the CPU
}
__host__ __device__ __forceinline__ float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

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

// N bytes at p (2-byte aligned, as every field of every block is) read as
// N / 2 16-bit loads: half the load instructions of byte reads, the GEMV's
// bottleneck (a warp's lanes read blocks 18+ bytes apart, so each load
// instruction touches several cache lines).
template <int N>
struct Bytes {
  uint16_t h[N / 2];
  __host__ __device__ __forceinline__ explicit Bytes(const uint8_t* p) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
#ifdef __CUDA_ARCH__
      h[i] = reinterpret_cast<const uint16_t*>(p)[i];
#else
      memcpy(&h[i], p + 2 * i, 2);
#endif
    }
  }
  // Byte i (little-endian halves, as on the host and the GPU).
  __host__ __device__ __forceinline__ uint32_t operator[](int i) const {
    return (static_cast<uint32_t>(h[i / 2]) >> (8 * (i % 2))) & 0xffu;
  }
};

// w[0..32) = elements [32u, 32u + 32) of the row at `row` (GGUF layout).
template <DType T>
__host__ __device__ __forceinline__ void dequant_unit(const uint8_t* row, int64_t u,
                                                      float (&w)[kUnit]) {
  if constexpr (T == DType::F32) {
    const float* p = reinterpret_cast<const float*>(row) + u * kUnit;
#pragma unroll
    for (int i = 0; i < kUnit; ++i) w[i] = p[i];
  } else if constexpr (T == DType::F16 || T == DType::BF16) {
    // 64 bytes: four 16-byte loads where aligned (every unit of a matrix
    // that starts 16-aligned, units being 64 bytes), else 16-bit ones.
    const uint8_t* p = row + u * kUnit * 2;
    uint32_t words[16];
#ifdef __CUDA_ARCH__
    if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4 v = reinterpret_cast<const uint4*>(p)[i];
        words[4 * i] = v.x;
        words[4 * i + 1] = v.y;
        words[4 * i + 2] = v.z;
        words[4 * i + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const Bytes<4> b(p + 4 * i);
        words[i] = b.h[0] | (static_cast<uint32_t>(b.h[1]) << 16);
      }
    }
#else
    memcpy(words, p, sizeof(words));
#endif
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint16_t lo = static_cast<uint16_t>(words[i] & 0xffffu);
      const uint16_t hi = static_cast<uint16_t>(words[i] >> 16);
      w[2 * i] = T == DType::F16 ? f16_to_f32(lo) : bf16_to_f32(lo);
      w[2 * i + 1] = T == DType::F16 ? f16_to_f32(hi) : bf16_to_f32(hi);
    }
  } else if constexpr (T == DType::Q8_0) {
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + u;
    const float d = f16_to_f32(b->d);
    const Bytes<32> qs(reinterpret_cast<const uint8_t*>(b->qs));
#pragma unroll
    for (int i = 0; i < kUnit; ++i)
      w[i] = d * static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(qs[i])));
  } else if constexpr (T == DType::Q4_0) {
    const BlockQ4_0* b = reinterpret_cast<const BlockQ4_0*>(row) + u;
    const float d = f16_to_f32(b->d);
    const Bytes<16> qs(b->qs);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      w[j] = d * static_cast<float>(static_cast<int>(qs[j] & 0x0f) - 8);
      w[j + 16] = d * static_cast<float>(static_cast<int>(qs[j] >> 4) - 8);
    }
  } else if constexpr (T == DType::Q4_1) {
    const BlockQ4_1* b = reinterpret_cast<const BlockQ4_1*>(row) + u;
    const float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
    const Bytes<16> qs(b->qs);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      w[j] = PAGELLM_ADD_RN(PAGELLM_MUL_RN(d, static_cast<float>(qs[j] & 0x0f)), m);
      w[j + 16] = PAGELLM_ADD_RN(PAGELLM_MUL_RN(d, static_cast<float>(qs[j] >> 4)), m);
    }
  } else if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
    // Low nibble of qs[j] and bit j of qh: element j; high nibble and bit
    // j + 16: element j + 16. Q5_0 centres on 16, Q5_1 adds its minimum.
    using Block = std::conditional_t<T == DType::Q5_0, BlockQ5_0, BlockQ5_1>;
    const Block* b = reinterpret_cast<const Block*>(row) + u;
    const float d = f16_to_f32(b->d);
    const Bytes<4> qhb(b->qh);
    const uint32_t qh = qhb.h[0] | (static_cast<uint32_t>(qhb.h[1]) << 16);
    const Bytes<16> qs(b->qs);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int>((qs[j] & 0x0f) | (((qh >> j) & 1) << 4));
      const int hi = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      if constexpr (T == DType::Q5_0) {
        w[j] = PAGELLM_MUL_RN(d, static_cast<float>(lo - 16));
        w[j + 16] = PAGELLM_MUL_RN(d, static_cast<float>(hi - 16));
      } else {
        const float m = f16_to_f32(b->m);
        w[j] = PAGELLM_ADD_RN(PAGELLM_MUL_RN(d, static_cast<float>(lo)), m);
        w[j + 16] = PAGELLM_ADD_RN(PAGELLM_MUL_RN(d, static_cast<float>(hi)), m);
      }
    }
  } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
    // Unit j of super-block u / 8: 2-bit fields at bit 2 * (j % 4) of
    // qs[32 * (j / 4) + l], sub-blocks of 16 (scale 2j + l / 16); Q3_K's high
    // bit is bit j of hmask[l] (set: no -4).
    using Block = std::conditional_t<T == DType::Q2_K, BlockQ2_K, BlockQ3_K>;
    const Block* b = reinterpret_cast<const Block*>(row) + u / 8;
    const int j = static_cast<int>(u % 8), shift = 2 * (j % 4);
    const Bytes<32> q(b->qs + 32 * (j / 4));
    const float d = f16_to_f32(b->d);
#pragma unroll
    for (int part = 0; part < 2; ++part) {
      if constexpr (T == DType::Q2_K) {
        const uint8_t sc = b->scales[2 * j + part];
        const float dl = PAGELLM_MUL_RN(d, static_cast<float>(sc & 0x0f));
        const float ml = PAGELLM_MUL_RN(f16_to_f32(b->dmin), static_cast<float>(sc >> 4));
#pragma unroll
        for (int l = 16 * part; l < 16 * part + 16; ++l)
          w[l] = PAGELLM_SUB_RN(PAGELLM_MUL_RN(dl, static_cast<float>((q[l] >> shift) & 3)), ml);
      } else {
        const float dl = PAGELLM_MUL_RN(d, static_cast<float>(scale_q3_k(b->scales, 2 * j + part)));
        const Bytes<16> hm(b->hmask + 16 * part);
#pragma unroll
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          const int v = static_cast<int>((q[l] >> shift) & 3) - (((hm[l % 16] >> j) & 1) ? 0 : 4);
          w[l] = PAGELLM_MUL_RN(dl, static_cast<float>(v));
        }
      }
    }
  } else if constexpr (T == DType::IQ4_NL || T == DType::IQ4_XS) {
    // Codes in Q4_0's nibble order; IQ4_XS: unit j is sub-block j % 8 of
    // super-block u / 8, with its 6-bit scale.
    const uint8_t* qp;
    float d;
    if constexpr (T == DType::IQ4_NL) {
      const BlockIQ4_NL* b = reinterpret_cast<const BlockIQ4_NL*>(row) + u;
      qp = b->qs;
      d = f16_to_f32(b->d);
    } else {
      const BlockIQ4_XS* b = reinterpret_cast<const BlockIQ4_XS*>(row) + u / 8;
      const int s = static_cast<int>(u % 8);
      const int ls =
          (((b->scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((b->scales_h >> (2 * s)) & 3) << 4)) -
          32;
      qp = b->qs + 16 * s;
      d = PAGELLM_MUL_RN(f16_to_f32(b->d), static_cast<float>(ls));
    }
    const Bytes<16> qs(qp);
#pragma unroll
    for (int l = 0; l < 16; ++l) {
      w[l] = PAGELLM_MUL_RN(d, static_cast<float>(iq4_value(qs[l] & 0x0fu)));
      w[l + 16] = PAGELLM_MUL_RN(d, static_cast<float>(iq4_value(qs[l] >> 4)));
    }
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    // Sub-block j of super-block u / 8: low (even j) or high nibbles of
    // qs[32 * (j / 2) ..], 6-bit scale and min; Q5_K adds bit j of qh[l].
    using Block = std::conditional_t<T == DType::Q4_K, BlockQ4_K, BlockQ5_K>;
    const Block* b = reinterpret_cast<const Block*>(row) + u / 8;
    const int j = static_cast<int>(u % 8);
    int sc, m;
    scale_min_k4(b->scales, j, &sc, &m);
    const float d1 = f16_to_f32(b->d) * static_cast<float>(sc);
    const float m1 = f16_to_f32(b->dmin) * static_cast<float>(m);
    const Bytes<32> q(b->qs + 32 * (j / 2));
    const int shift = (j & 1) * 4;
    if constexpr (T == DType::Q4_K) {
#pragma unroll
      for (int l = 0; l < 32; ++l)
        w[l] = PAGELLM_SUB_RN(PAGELLM_MUL_RN(d1, static_cast<float>((q[l] >> shift) & 0x0f)), m1);
    } else {
      const Bytes<32> qh(b->qh);
#pragma unroll
      for (int l = 0; l < 32; ++l) {
        const uint32_t v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
        w[l] = PAGELLM_SUB_RN(PAGELLM_MUL_RN(d1, static_cast<float>(v)), m1);
      }
    }
  } else if constexpr (T == DType::Q6_K) {
    // Unit j of super-block u / 8: half j / 4, quarter g = j % 4 of it.
    const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(row) + u / 8;
    const int j = static_cast<int>(u % 8), half = j / 4, g = j % 4;
    const Bytes<32> ql(b->ql + 64 * half + (g & 1) * 32);
    const Bytes<32> qh(b->qh + 32 * half);
    const int8_t* sc = b->scales + 8 * half + 2 * g;
    const int lshift = (g >> 1) * 4, hshift = 2 * g;
    const float d = f16_to_f32(b->d);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int q =
          static_cast<int>(((ql[l] >> lshift) & 0x0f) | (((qh[l] >> hshift) & 3) << 4)) - 32;
      w[l] =
          PAGELLM_MUL_RN(PAGELLM_MUL_RN(d, static_cast<float>(sc[l / 16])), static_cast<float>(q));
    }
  }
}

template <DType T>
using TypeTag = std::integral_constant<DType, T>;

// Calls f(TypeTag<T>{}) for the runtime type t (f reads the type back as
// decltype(tag)::value); false if t is not one of the types the CUDA kernels
// dequantize: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K,
// IQ4_NL, IQ4_XS.
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
    case DType::IQ4_NL:
      f(TypeTag<DType::IQ4_NL>{});
      return true;
    case DType::IQ4_XS:
      f(TypeTag<DType::IQ4_XS>{});
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
    default:
      return false;
  }
}

inline unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace pagellm::cuda::detail
