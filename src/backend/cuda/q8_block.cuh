// One 32-element block of int8 activations (q8_activations.h), shared by the
// kernels that write them (the quantizer, the fused RMSNorm / SwiGLU
// producers, paged attention's output) and their host renditions (needs
// nvcc; compiled for the host too).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/device_common.cuh"
#include "tensor/fp16.h"

namespace pagellm::cuda::detail {

// The block's f16 scale d (as f32) and 1 / d (0 for a block of zeros), from
// its largest magnitude: the CPU's arithmetic (division, f16 rounding).
__host__ __device__ __forceinline__ void q8_block_scale(float amax, float* d, float* id) {
#ifdef __CUDA_ARCH__
  *d = f16_to_f32(f32_to_f16(__fdiv_rn(amax, 127.0f)));
  *id = *d != 0.0f ? __fdiv_rn(1.0f, *d) : 0.0f;
#else
  *d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
  *id = *d != 0.0f ? 1.0f / *d : 0.0f;
#endif
}

// round-half-even(x * id) clamped to [-127, 127]; NaN gives 0.
__host__ __device__ __forceinline__ int8_t q8_code_of(float x, float id) {
#ifdef __CUDA_ARCH__
  const float r = rintf(__fmul_rn(x, id));
#else
  const float r = std::nearbyint(x * id);
#endif
  if (r >= 127.0f) return 127;
  if (r <= -127.0f) return -127;
  return r == r ? static_cast<int8_t>(r) : 0;
}

// Lanes l = 0..31 of a warp, each holding element l of a block: its codes,
// and (lane 0) its scale and code sum.
__device__ __forceinline__ void quantize_lanes(float xv, int lane, int8_t* qs, float* d_out,
                                               int32_t* sum_out) {
  const float amax = warp_max(fabsf(xv));
  float d, id;
  q8_block_scale(amax, &d, &id);
  const int8_t q = q8_code_of(xv, id);
  qs[lane] = q;
  int s = q;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) {
    *d_out = d;
    *sum_out = s;
  }
}

// The block's codes, scale and sum from its 32 values, on the host.
inline void quantize_block_host(const float* xb, int8_t* qs, float* d_out, int32_t* sum_out) {
  float amax = 0.0f;  // max is exact in any order, as warp_max's tree
  for (int l = 0; l < 32; ++l) amax = std::fmax(amax, std::fabs(xb[l]));
  float d, id;
  q8_block_scale(amax, &d, &id);
  int s = 0;
  for (int l = 0; l < 32; ++l) {
    qs[l] = q8_code_of(xb[l], id);
    s += qs[l];
  }
  *d_out = d;
  *sum_out = s;
}

}  // namespace pagellm::cuda::detail
