// Device-side helpers shared by the .cu files of this folder (not a public
// header: it needs nvcc): f16 / bf16 conversions, exact-rounding arithmetic
// macros, warp reductions. Weight dequantization: dequant.cuh.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace pagellm::cuda::detail {

constexpr int kUnit = 32;  // elements per dequantization unit

// Calls f(std::integral_constant<DType, T>) for a (validated) KV cache type:
// f32, f16, else q8_0. The attention and KV-write launches instantiate per type.
template <typename F>
void with_cache_type(DType type, F&& f) {
  switch (type) {
    case DType::F32:
      return f(std::integral_constant<DType, DType::F32>{});
    case DType::F16:
      return f(std::integral_constant<DType, DType::F16>{});
    default:
      return f(std::integral_constant<DType, DType::Q8_0>{});
  }
}

// Code that is also compiled for the host (dequant.cuh) spells a*b+c with
// these: on the device the _rn intrinsics keep nvcc from fusing it into an
// FMA, so both give the CPU's bits.
#ifdef __CUDA_ARCH__
#define PAGELLM_MUL_RN(a, b) __fmul_rn(a, b)
#define PAGELLM_ADD_RN(a, b) __fadd_rn(a, b)
#define PAGELLM_SUB_RN(a, b) __fsub_rn(a, b)
#else
#define PAGELLM_MUL_RN(a, b) ((a) * (b))
#define PAGELLM_ADD_RN(a, b) ((a) + (b))
#define PAGELLM_SUB_RN(a, b) ((a) - (b))
#endif

// a * b + c rounded once, on the host as on the device.
__host__ __device__ __forceinline__ float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

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
// warp_sum on the host, for the kernels' host renditions: lane 0's result
// of the same shuffle tree (at each offset o, every lane adds lane (lane ^ o)'s
// value), for the 32 float or double lanes at `lanes`.
template <typename V>
inline V warp_sum_host(const V* lanes) {
  V v[32];
  for (int l = 0; l < 32; ++l) v[l] = lanes[l];
  for (int o = 16; o > 0; o >>= 1) {
    V prev[32];
    for (int l = 0; l < 32; ++l) prev[l] = v[l];
    for (int l = 0; l < 32; ++l) v[l] = prev[l] + prev[l ^ o];
  }
  return v[0];
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// 1 / sqrt(mean(x^2) + eps) of the n floats at xr, by the calling block's
// kRmsThreads threads, every one of which gets it: thread i sums the squares of
// elements i, i + kRmsThreads, ... in double, warps add by shuffles, thread 0
// adds the warps in order (rms_scale_host in ops.h spells this out).
constexpr int kRmsThreads = 256;
__device__ __forceinline__ float block_rms_scale(const float* xr, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += kRmsThreads) {
    const double v = xr[i];
    ss = __dadd_rn(ss, __dmul_rn(v, v));  // unfused, as the host rendition
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  __shared__ double part[kRmsThreads / 32];
  __shared__ float scale_s;
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kRmsThreads / 32; ++w) total += part[w];
    scale_s = static_cast<float>(1.0 / sqrt(total / static_cast<double>(n) + eps));
  }
  __syncthreads();
  return scale_s;
}

// silu(g) * u, silu(g) = g / (1 + exp(-g)), rounded step by step.
__device__ __forceinline__ float silu_mul_value(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

inline unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace pagellm::cuda::detail
