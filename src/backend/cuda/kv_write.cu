#include "backend/cuda/kv_write.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/rope.cuh"
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

// Stores one head row (src: D floats, global or shared) at cache row `row`,
// the block's threads over it. Q8_0: one warp per 32-element block.
template <DType T>
__device__ __forceinline__ void store_head_row(void* cache, int64_t row, int32_t D,
                                               const float* src) {
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

// The same on the host, the warp's maximum spelled out.
template <DType T>
void store_head_row_host(void* cache, int64_t row, int32_t D, const float* src) {
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

// Block (token, kv head); threads over the head row.
template <DType T>
__global__ void kv_write_kernel(KvWriteArgs a) {
  pdl_start();
  const int32_t t = blockIdx.x, h = blockIdx.y;
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  const int64_t row = slot * a.n_kv_heads + h;
  store_head_row<T>(a.k_cache, row, a.head_dim, head_src(a, 0, t, h));
  if (a.v_cache != a.k_cache) store_head_row<T>(a.v_cache, row, a.head_dim, head_src(a, 1, t, h));
}

// Token t's {cos, sin} pairs.
__host__ __device__ __forceinline__ const float2* rope_pairs(const KvRopeArgs& r, int32_t t) {
  return reinterpret_cast<const float2*>(r.cos_sin) + static_cast<int64_t>(t) * (r.n_rot / 2);
}

// Block (token, y): y < n_kv_heads rotates K head y in shared memory, then
// stores it and V head y; the other blocks rotate q head y - n_kv_heads in
// place. Padding tokens (slot < 0) still rotate their q, as the RoPE kernel.
template <DType T>
__global__ void rope_kv_write_kernel(KvWriteArgs a, KvRopeArgs r) {
  extern __shared__ float k_row[];  // [head_dim]
  pdl_start();
  const int32_t t = blockIdx.x, y = blockIdx.y, D = a.head_dim, half = r.n_rot / 2;
  const float2* cs = rope_pairs(r, t);
  if (y >= a.n_kv_heads) {
    float* qh = r.q + t * r.q_stride + static_cast<int64_t>(y - a.n_kv_heads) * D;
    for (int i = threadIdx.x; i < half; i += blockDim.x) rope_rotate(qh, i, half, r.neox, cs[i]);
    return;
  }
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  const float* k = head_src(a, 0, t, y);
  for (int i = threadIdx.x; i < D; i += blockDim.x) k_row[i] = k[i];
  __syncthreads();
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_rotate(k_row, i, half, r.neox, cs[i]);
  __syncthreads();
  const int64_t row = slot * a.n_kv_heads + y;
  store_head_row<T>(a.k_cache, row, D, k_row);
  if (a.v_cache != a.k_cache) store_head_row<T>(a.v_cache, row, D, head_src(a, 1, t, y));
}

// The kernels' work for token t on the host; with r, the RoPE kernel's too.
template <DType T>
void kv_write_host_token(const KvWriteArgs& a, const KvRopeArgs* r, int32_t t) {
  const int32_t D = a.head_dim, half = r ? r->n_rot / 2 : 0;
  if (r)
    for (int32_t h = 0; h < r->n_heads; ++h)
      for (int32_t i = 0; i < half; ++i)
        rope_rotate(r->q + t * r->q_stride + static_cast<int64_t>(h) * D, i, half, r->neox,
                    rope_pairs(*r, t)[i]);
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  std::vector<float> k_row(static_cast<size_t>(D));
  for (int32_t h = 0; h < a.n_kv_heads; ++h) {
    const int64_t row = slot * a.n_kv_heads + h;
    const float* k = head_src(a, 0, t, h);
    std::copy(k, k + D, k_row.begin());
    for (int32_t i = 0; i < half; ++i)
      rope_rotate(k_row.data(), i, half, r->neox, rope_pairs(*r, t)[i]);
    store_head_row_host<T>(a.k_cache, row, D, k_row.data());
    if (a.v_cache != a.k_cache) store_head_row_host<T>(a.v_cache, row, D, head_src(a, 1, t, h));
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

void validate(const KvWriteArgs& a, const KvRopeArgs& r) {
  validate(a);
  if (r.n_rot < 0 || r.n_rot % 2 != 0 || r.n_rot > a.head_dim)
    throw ConfigError(
        fmt::format("CUDA RoPE + KV write: n_rot {} for heads of {}", r.n_rot, a.head_dim));
  if (r.n_heads < 0 || a.n_kv_heads + static_cast<int64_t>(r.n_heads) > 65535)
    throw ConfigError(fmt::format("CUDA RoPE + KV write: {} query heads with {} KV heads",
                                  r.n_heads, a.n_kv_heads));
  if (r.q_stride < static_cast<int64_t>(r.n_heads) * a.head_dim)
    throw ConfigError(fmt::format("CUDA RoPE + KV write: q rows of {} floats for {} heads of {}",
                                  r.q_stride, r.n_heads, a.head_dim));
}

namespace {

constexpr int kThreads = 128;

}  // namespace

void kv_write_host(const KvWriteArgs& a) {
  validate(a);
  with_cache_type(a.cache_type, [&](auto T) {
    for (int32_t t = 0; t < a.n_tokens; ++t) kv_write_host_token<T.value>(a, nullptr, t);
  });
}

void rope_kv_write_host(const KvWriteArgs& a, const KvRopeArgs& r) {
  validate(a, r);
  with_cache_type(a.cache_type, [&](auto T) {
    for (int32_t t = 0; t < a.n_tokens; ++t) kv_write_host_token<T.value>(a, &r, t);
  });
}

void kv_write(const CudaDevice& dev, const KvWriteArgs& a) {
  validate(a);
  if (a.n_tokens == 0) return;
  dev.make_current();
  const dim3 grid(static_cast<unsigned>(a.n_tokens), static_cast<unsigned>(a.n_kv_heads));
  with_cache_type(a.cache_type, [&](auto T) {
    launch_pdl(dev, "kv_write", kv_write_kernel<T.value>, grid, dim3(kThreads), 0, a);
  });
}

void rope_kv_write(const CudaDevice& dev, const KvWriteArgs& a, const KvRopeArgs& r) {
  validate(a, r);
  if (a.n_tokens == 0) return;
  dev.make_current();
  const dim3 grid(static_cast<unsigned>(a.n_tokens),
                  static_cast<unsigned>(a.n_kv_heads + r.n_heads));
  const size_t smem = static_cast<size_t>(a.head_dim) * sizeof(float);
  with_cache_type(a.cache_type, [&](auto T) {
    launch_pdl(dev, "rope_kv_write", rope_kv_write_kernel<T.value>, grid, dim3(kThreads), smem, a,
               r);
  });
}

}  // namespace pagellm::cuda
