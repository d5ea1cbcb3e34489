#include "backend/cuda/kv_write.h"

#include <fmt/format.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

// Block (token, kv head); threads over the head row. Q8_0: one warp per
// 32-element block.
template <DType T>
__global__ void kv_write_kernel(KvWriteArgs a) {
  const int32_t t = blockIdx.x, h = blockIdx.y;
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  const int32_t D = a.head_dim;
  const int64_t row = slot * a.n_kv_heads + h;
  for (int which = 0; which < 2; ++which) {
    const float* src =
        (which == 0 ? a.k + t * a.k_stride : a.v + t * a.v_stride) + static_cast<int64_t>(h) * D;
    void* cache = which == 0 ? a.k_cache : a.v_cache;
    if constexpr (T == DType::F32) {
      float* dst = static_cast<float*>(cache) + row * D;
      for (int i = threadIdx.x; i < D; i += blockDim.x) dst[i] = src[i];
    } else if constexpr (T == DType::F16) {
      uint16_t* dst = static_cast<uint16_t*>(cache) + row * D;
      for (int i = threadIdx.x; i < D; i += blockDim.x) dst[i] = f32_to_f16(src[i]);
    } else {
      BlockQ8_0* dst = static_cast<BlockQ8_0*>(cache) + row * (D / QK8_0);
      const int lane = threadIdx.x % 32;
      for (int b = threadIdx.x / 32; b < D / QK8_0; b += blockDim.x / 32) {
        const float x = src[b * QK8_0 + lane];
        const float amax = warp_max(fabsf(x));
        const float d = __fdiv_rn(amax, 127.0f);
        const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        // |x * id| <= 127 by construction; the clamp only guards NaN/inf.
        const float r = roundf(__fmul_rn(x, id));
        const int q = r != r ? 0 : max(-127, min(127, static_cast<int>(r)));
        dst[b].qs[lane] = static_cast<int8_t>(q);
        if (lane == 0) dst[b].d = f32_to_f16(d);
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

void kv_write(const CudaDevice& dev, const KvWriteArgs& a) {
  validate(a);
  if (a.n_tokens == 0) return;
  dev.make_current();
  const dim3 grid(static_cast<unsigned>(a.n_tokens), static_cast<unsigned>(a.n_kv_heads));
  const auto s = static_cast<cudaStream_t>(dev.stream());
  switch (a.cache_type) {
    case DType::F32:
      kv_write_kernel<DType::F32><<<grid, 128, 0, s>>>(a);
      break;
    case DType::F16:
      kv_write_kernel<DType::F16><<<grid, 128, 0, s>>>(a);
      break;
    default:
      kv_write_kernel<DType::Q8_0><<<grid, 128, 0, s>>>(a);
      break;
  }
  check_launch("kv_write", dev.index());
}

}  // namespace pagellm::cuda
