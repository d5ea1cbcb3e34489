// RoPE's per-pair arithmetic, shared by the RoPE kernel (ops.cu), the fused
// RoPE + KV write (kv_write.cu) and their host renditions (needs nvcc;
// compiled for the host too), so that every path rotates a pair alike.
//
// Table layout: cos_sin [n_tokens][n_rot / 2] of {cos, sin} f32, row t for
// the position of the step's token t.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/device_common.cuh"

namespace pagellm::cuda::detail {

// {cos, sin} of pair i's angle at position pos (in double, as the CPU): the
// pair's frequency divided by its factor (Llama 3.1, LongRoPE; 1 without),
// cos and sin times attn_factor.
__host__ __device__ __forceinline__ float2 rope_cos_sin(int32_t pos, int32_t i, int32_t n_rot,
                                                        float freq_base, float freq_scale,
                                                        float factor = 1.0f,
                                                        float attn_factor = 1.0f) {
  double inv_freq = pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
  inv_freq /= factor;
  const double angle = static_cast<double>(pos) * freq_scale * inv_freq;
  return make_float2(static_cast<float>(cos(angle) * attn_factor),
                     static_cast<float>(sin(angle) * attn_factor));
}

// Rotates pair i of the head at v: kNorm (v[2i], v[2i+1]), kNeox (v[i],
// v[i + half]); a * c - b * s and a * s + b * c, rounded step by step as on
// the CPU.
__host__ __device__ __forceinline__ void rope_rotate(float* v, int32_t i, int32_t half, bool neox,
                                                     float2 cs) {
  const int32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
  const float a = v[i0], b = v[i1];
  v[i0] = PAGELLM_SUB_RN(PAGELLM_MUL_RN(a, cs.x), PAGELLM_MUL_RN(b, cs.y));
  v[i1] = PAGELLM_ADD_RN(PAGELLM_MUL_RN(a, cs.y), PAGELLM_MUL_RN(b, cs.x));
}

}  // namespace pagellm::cuda::detail
