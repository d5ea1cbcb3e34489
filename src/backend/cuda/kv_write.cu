#include "backend/cuda/kv_write.h"

#include <fmt/format.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/pdl.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

// f32 -> f16 bits, nearest even, on the host and the device alike.
__host__ __device__ __forceinline__ uint16_t to_f16_bits(float f) {
  const __half_raw r = __half(__float2half_rn(f));
  return r.x;
}

// Lane `lane` of a Q8_0 block with absolute maximum amax: its code (and the
// block's d, which lane 0 stores).
__host__ __device__ __forceinline__ int8_t q8_code(float x, float amax, float* d_out) {
#ifdef __CUDA_ARCH__
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  const float r = roundf(__fmul_rn(x, id));
#else
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float r = roundf(x * id);
#endif
  *d_out = d;
  // |x * id| <= 127 by construction; the clamp only guards NaN/inf.
  const int q = r != r ? 0 : (r < -127.0f ? -127 : (r > 127.0f ? 127 : static_cast<int>(r)));
  return static_cast<int8_t>(q);
}

// Element i of head row `row` of a f32 / f16 cache, from x.
template <DType T>
__host__ __device__ __forceinline__ void store_elem(void* cache, int64_t row, int D, int i,
                                                    float x) {
  if constexpr (T == DType::F32)
    static_cast<float*>(cache)[row * D + i] = x;
  else
    static_cast<uint16_t*>(cache)[row * D + i] = to_f16_bits(x);
}

// Token t's head h row of K (which 0) or V (which 1).
__host__ __device__ __forceinline__ const float* head_src(const KvWriteArgs& a, int which,
                                                          int32_t t, int32_t h) {
  return (which == 0 ? a.k + t * a.k_stride : a.v + t * a.v_stride) +
         static_cast<int64_t>(h) * a.head_dim;
}

// Block (token, kv head); threads over the head row. Q8_0: one warp per
// 32-element block.
template <DType T>
__global__ void kv_write_kernel(KvWriteArgs a) {
  pdl_start();
  const int32_t t = blockIdx.x, h = blockIdx.y;
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  const int32_t D = a.head_dim;
  const int64_t row = slot * a.n_kv_heads + h;
  for (int which = 0; which < 2; ++which) {
    const float* src = head_src(a, which, t, h);
    void* cache = which == 0 ? a.k_cache : a.v_cache;
    if constexpr (T == DType::F32 || T == DType::F16) {
      for (int i = threadIdx.x; i < D; i += blockDim.x) store_elem<T>(cache, row, D, i, src[i]);
    } else {
      BlockQ8_0* dst = static_cast<BlockQ8_0*>(cache) + row * (D / QK8_0);
      const int lane = threadIdx.x % 32;
      for (int b = threadIdx.x / 32; b < D / QK8_0; b += blockDim.x / 32) {
        const float x = src[b * QK8_0 + lane];
        float d;
        dst[b].qs[lane] = q8_code(x, warp_max(fabsf(x)), &d);
        if (lane == 0) dst[b].d = to_f16_bits(d);
      }
    }
  }
}

// The kernel's work for token t on the host, the warp's maximum spelled out.
template <DType T>
void kv_write_host_token(const KvWriteArgs& a, int32_t t) {
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  const int32_t D = a.head_dim;
  for (int32_t h = 0; h < a.n_kv_heads; ++h) {
    const int64_t row = slot * a.n_kv_heads + h;
    for (int which = 0; which < 2; ++which) {
      const float* src = head_src(a, which, t, h);
      void* cache = which == 0 ? a.k_cache : a.v_cache;
      if constexpr (T == DType::F32 || T == DType::F16) {
        for (int i = 0; i < D; ++i) store_elem<T>(cache, row, D, i, src[i]);
      } else {
        BlockQ8_0* dst = static_cast<BlockQ8_0*>(cache) + row * (D / QK8_0);
        for (int b = 0; b < D / QK8_0; ++b) {
          float amax = 0.0f;
          for (int lane = 0; lane < 32; ++lane) amax = fmaxf(amax, fabsf(src[b * QK8_0 + lane]));
          float d = 0.0f;
          for (int lane = 0; lane < 32; ++lane)
            dst[b].qs[lane] = q8_code(src[b * QK8_0 + lane], amax, &d);
          dst[b].d = to_f16_bits(d);
        }
      }
    }
  }
}

}  // namespace

void validate(const KvWriteArgs& a) {
  if (a.cache_type != DType::F16 && a.cache_type != DType::F32 && a.cache_type != DType::Q8_0)
    throw ConfigError(fmt::format("CUDA KV write: unsupported cache type '{}' (f16, f32, q8_0)",
                                  dtype_name(a.cache_type)));
  if (a.cache_type == DType::Q8_0 && a.head_dim % QK8_0 != 0)
    throw ConfigError(
        fmt::format("CUDA KV write: a q8_0 cache needs a head size that is a "
                    "multiple of 32 (got {})",
                    a.head_dim));
  if (a.n_tokens < 0 || a.n_kv_heads <= 0 || a.head_dim <= 0)
    throw ConfigError(fmt::format("CUDA KV write: bad shape {} tokens, {} heads of {}", a.n_tokens,
                                  a.n_kv_heads, a.head_dim));
}

void kv_write_host(const KvWriteArgs& a) {
  validate(a);
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    switch (a.cache_type) {
      case DType::F32:
        kv_write_host_token<DType::F32>(a, t);
        break;
      case DType::F16:
        kv_write_host_token<DType::F16>(a, t);
        break;
      default:
        kv_write_host_token<DType::Q8_0>(a, t);
        break;
    }
  }
}

void kv_write(const CudaDevice& dev, const KvWriteArgs& a) {
  validate(a);
  if (a.n_tokens == 0) return;
  dev.make_current();
  const dim3 grid(static_cast<unsigned>(a.n_tokens), static_cast<unsigned>(a.n_kv_heads));
  switch (a.cache_type) {
    case DType::F32:
      launch_pdl(dev, "kv_write", kv_write_kernel<DType::F32>, grid, dim3(128), 0, a);
      break;
    case DType::F16:
      launch_pdl(dev, "kv_write", kv_write_kernel<DType::F16>, grid, dim3(128), 0, a);
      break;
    default:
      launch_pdl(dev, "kv_write", kv_write_kernel<DType::Q8_0>, grid, dim3(128), 0, a);
      break;
  }
}

}  // namespace pagellm::cuda
