#include "backend/cuda/paged_attention.h"

#include <fmt/format.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = kCudaAttentionMaxHeadDim / 32;  // dims d = lane + 32 i

// q . (head row `row` of the K cache); q in shared memory.
template <DType T>
__device__ __forceinline__ float dot_row(const void* cache, int64_t row, const float* q, int D) {
  float s = 0.0f;
  if constexpr (T == DType::F32) {
    const float* k = static_cast<const float*>(cache) + row * D;
    for (int i = 0; i < D; ++i) s += q[i] * k[i];
  } else if constexpr (T == DType::F16) {
    const uint16_t* k = static_cast<const uint16_t*>(cache) + row * D;
    if (D % 8 == 0) {  // 16-byte loads (cudaMalloc'd caches are 256-byte aligned)
      const uint4* k4 = reinterpret_cast<const uint4*>(k);
      for (int c = 0; c < D / 8; ++c) {
        const uint4 pk = k4[c];
        const __half2* h2 = reinterpret_cast<const __half2*>(&pk);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __half22float2(h2[e]);
          s += q[c * 8 + 2 * e] * f.x + q[c * 8 + 2 * e + 1] * f.y;
        }
      }
    } else {
      for (int i = 0; i < D; ++i) s += q[i] * f16_to_f32(k[i]);
    }
  } else {
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(cache) + row * (D / QK8_0);
    for (int j = 0; j < D / QK8_0; ++j) {
      float bs = 0.0f;
#pragma unroll
      for (int i = 0; i < QK8_0; ++i) bs += q[j * QK8_0 + i] * static_cast<float>(b[j].qs[i]);
      s += f16_to_f32(b[j].d) * bs;
    }
  }
  return s;
}

// Element d of head row `row` of the V cache.
template <DType T>
__device__ __forceinline__ float load_elem(const void* cache, int64_t row, int D, int d) {
  if constexpr (T == DType::F32) {
    return static_cast<const float*>(cache)[row * D + d];
  } else if constexpr (T == DType::F16) {
    return f16_to_f32(static_cast<const uint16_t*>(cache)[row * D + d]);
  } else {
    const BlockQ8_0& b = static_cast<const BlockQ8_0*>(cache)[row * (D / QK8_0) + d / QK8_0];
    return f16_to_f32(b.d) * static_cast<float>(b.qs[d % QK8_0]);
  }
}

template <DType T>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(PagedAttentionArgs a) {
  const int t = blockIdx.x, h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int D = a.head_dim;
  const int kvh = h / (a.n_heads / a.n_kv_heads);
  __shared__ float q_s[kCudaAttentionMaxHeadDim];
  __shared__ float m_s[kWarps], l_s[kWarps];
  __shared__ float acc_s[kWarps][kCudaAttentionMaxHeadDim];

  const float* q = a.q + t * a.q_stride + static_cast<int64_t>(h) * D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) q_s[i] = q[i];
  __syncthreads();

  const int32_t* table =
      a.block_table_flat + static_cast<int64_t>(a.token_seq[t]) * a.block_table_stride;
  const int32_t n_ctx = a.token_pos[t] + 1;
  float m = -INFINITY, l = 0.0f;
  float acc[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) acc[i] = 0.0f;

  for (int32_t p0 = warp * 32; p0 < n_ctx; p0 += kWarps * 32) {
    const int32_t p = p0 + lane;
    int64_t row = 0;
    float s = -INFINITY;
    if (p < n_ctx) {
      const int64_t slot =
          static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
      row = slot * a.n_kv_heads + kvh;
      s = dot_row<T>(a.k_cache, row, q_s, D) * a.scale;
    }
    const float m_new = fmaxf(m, warp_max(s));  // finite: lane 0's position exists
    const float alpha = expf(m - m_new);        // 0 on the first chunk
    const float pw = p < n_ctx ? expf(s - m_new) : 0.0f;
    l = l * alpha + warp_sum(pw);
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) acc[i] *= alpha;
    const int cn = min(32, n_ctx - p0);
    for (int j = 0; j < cn; ++j) {
      const float w = __shfl_sync(0xffffffffu, pw, j);
      const int64_t rj = __shfl_sync(0xffffffffu, row, j);
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < D) acc[i] += w * load_elem<T>(a.v_cache, rj, D, d);
      }
    }
    m = m_new;
  }

  // Merge the warps' partial softmaxes.
  if (lane == 0) {
    m_s[warp] = m;
    l_s[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < D) acc_s[warp][d] = acc[i];
  }
  __syncthreads();
  float m_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, m_s[w]);
  float f[kWarps], l_all = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    f[w] = l_s[w] > 0.0f ? expf(m_s[w] - m_all) : 0.0f;
    l_all += l_s[w] * f[w];
  }
  float* out = a.out + t * a.out_stride + static_cast<int64_t>(h) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += acc_s[w][d] * f[w];
    out[d] = v / l_all;
  }
}

}  // namespace

void validate(const PagedAttentionArgs& a) {
  if (a.kv_type != DType::F16 && a.kv_type != DType::F32 && a.kv_type != DType::Q8_0)
    throw ConfigError(fmt::format("CUDA attention: unsupported KV type '{}' (f16, f32, q8_0)",
                                  dtype_name(a.kv_type)));
  if (a.head_dim <= 0 || a.head_dim > kCudaAttentionMaxHeadDim)
    throw ConfigError(fmt::format("CUDA attention: head size {} (1..{} supported)", a.head_dim,
                                  kCudaAttentionMaxHeadDim));
  if (a.kv_type == DType::Q8_0 && a.head_dim % QK8_0 != 0)
    throw ConfigError(fmt::format(
        "CUDA attention: a q8_0 cache needs a head size that is a multiple of 32 (got {})",
        a.head_dim));
  if (a.n_kv_heads <= 0 || a.n_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    throw ConfigError(
        fmt::format("CUDA attention: {} query heads for {} KV heads", a.n_heads, a.n_kv_heads));
  if (a.block_size <= 0 || a.n_tokens < 0 || a.n_heads > 65535)
    throw ConfigError(fmt::format("CUDA attention: bad shape (block size {}, {} tokens)",
                                  a.block_size, a.n_tokens));
}

void paged_attention(const CudaDevice& dev, const PagedAttentionArgs& a) {
  validate(a);
  if (a.n_tokens == 0) return;
  dev.make_current();
  const dim3 grid(static_cast<unsigned>(a.n_tokens), static_cast<unsigned>(a.n_heads));
  const auto s = static_cast<cudaStream_t>(dev.stream());
  switch (a.kv_type) {
    case DType::F32:
      attention_kernel<DType::F32><<<grid, kWarps * 32, 0, s>>>(a);
      break;
    case DType::F16:
      attention_kernel<DType::F16><<<grid, kWarps * 32, 0, s>>>(a);
      break;
    default:
      attention_kernel<DType::Q8_0><<<grid, kWarps * 32, 0, s>>>(a);
      break;
  }
  check_launch("paged_attention", dev.index());
}

}  // namespace pagellm::cuda
