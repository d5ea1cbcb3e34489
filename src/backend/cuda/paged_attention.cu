#include "backend/cuda/paged_attention.h"

#include <fmt/format.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/q8_activations.h"
#include "backend/cuda/q8_block.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = kCudaAttentionMaxHeadDim / 32;  // dims d = lane + 32 i

// q . (head row `row` of the K cache); q in shared memory.
template <DType T>
__host__ __device__ __forceinline__ float dot_row(const void* cache, int64_t row, const float* q,
                                                  int D) {
  float s = 0.0f;
  if constexpr (T == DType::F32) {
    const float* k = static_cast<const float*>(cache) + row * D;
    for (int i = 0; i < D; ++i) s += q[i] * k[i];
  } else if constexpr (T == DType::F16) {
    const uint16_t* k = static_cast<const uint16_t*>(cache) + row * D;
#ifdef __CUDA_ARCH__
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
      return s;
    }
#endif
    for (int i = 0; i < D; ++i) s += q[i] * f16_to_f32(k[i]);
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
__host__ __device__ __forceinline__ float load_elem(const void* cache, int64_t row, int D, int d) {
  if constexpr (T == DType::F32) {
    return static_cast<const float*>(cache)[row * D + d];
  } else if constexpr (T == DType::F16) {
    return f16_to_f32(static_cast<const uint16_t*>(cache)[row * D + d]);
  } else {
    const BlockQ8_0& b = static_cast<const BlockQ8_0*>(cache)[row * (D / QK8_0) + d / QK8_0];
    return f16_to_f32(b.d) * static_cast<float>(b.qs[d % QK8_0]);
  }
}

// The pieces of the kernel below that one lane computes, shared with its host
// rendition (paged_attention_host).

// Lane work 1: the scaled score of position p of token t's sequence for query
// head h (KV head kvh), and the cache row it read; -inf past the context.
template <DType T>
__host__ __device__ __forceinline__ float lane_score(const PagedAttentionArgs& a,
                                                     const int32_t* table, int kvh,
                                                     const float* q_s, int32_t p, int32_t n_ctx,
                                                     int64_t* row) {
  *row = 0;
  if (p >= n_ctx) return -INFINITY;
  const int64_t slot =
      static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
  *row = slot * a.n_kv_heads + kvh;
  return dot_row<T>(a.k_cache, *row, q_s, a.head_dim) * a.scale;
}

// Lane work 2: acc[i] += w * V[row][lane + 32 i], the lane's dims.
template <DType T>
__host__ __device__ __forceinline__ void lane_add_v(const PagedAttentionArgs& a,
                                                    float (&acc)[kMaxPerLane], int lane, float w,
                                                    int64_t row) {
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < a.head_dim) acc[i] += w * load_elem<T>(a.v_cache, row, a.head_dim, d);
  }
}

// The merge of the warps' partial softmaxes (max m_w, sum l_w): each warp's
// factor f_w and the total l_all; out[d] = sum_w acc_w[d] f_w / l_all.
__host__ __device__ __forceinline__ void merge_factors(const float (&m_s)[kWarps],
                                                       const float (&l_s)[kWarps],
                                                       float (&f)[kWarps], float* l_all) {
  float m_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, m_s[w]);
  *l_all = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    f[w] = l_s[w] > 0.0f ? expf(m_s[w] - m_all) : 0.0f;
    *l_all += l_s[w] * f[w];
  }
}

// Where the output rows go as int8 activations (qs == nullptr: nowhere).
struct Q8Dst {
  int8_t* qs = nullptr;
  float* d = nullptr;
  int32_t* sum = nullptr;
};

Q8Dst q8_dst_of(void* dst, const PagedAttentionArgs& a) {
  if (!dst) return {};
  const Q8ActView v = q8_act_view(dst, a.n_tokens, static_cast<int64_t>(a.n_heads) * a.head_dim);
  return {const_cast<int8_t*>(v.qs), const_cast<float*>(v.d), const_cast<int32_t*>(v.sum)};
}

template <DType T>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(PagedAttentionArgs a, Q8Dst q8) {
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
    int64_t row;
    const float s = lane_score<T>(a, table, kvh, q_s, p0 + lane, n_ctx, &row);
    const float m_new = fmaxf(m, warp_max(s));  // finite: lane 0's position exists
    const float alpha = expf(m - m_new);        // 0 on the first chunk
    const float pw = p0 + lane < n_ctx ? expf(s - m_new) : 0.0f;
    l = l * alpha + warp_sum(pw);
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) acc[i] *= alpha;
    const int cn = min(32, n_ctx - p0);
    for (int j = 0; j < cn; ++j)
      lane_add_v<T>(a, acc, lane, __shfl_sync(0xffffffffu, pw, j),
                    __shfl_sync(0xffffffffu, row, j));
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
  float f[kWarps], l_all;
  merge_factors(m_s, l_s, f, &l_all);
  float* out = a.out + t * a.out_stride + static_cast<int64_t>(h) * D;
  // Warp w writes dims 32 w .. 32 w + 32 (+ 128, ...): with D a multiple of
  // 32, whole blocks of the int8 row, whose lanes quantize them together.
  const int64_t cols = static_cast<int64_t>(a.n_heads) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += acc_s[w][d] * f[w];
    v = v / l_all;
    out[d] = v;
    if (q8.qs) {
      const int64_t c0 = static_cast<int64_t>(h) * D + (d - lane), b = (t * cols + c0) / 32;
      quantize_lanes(v, lane, q8.qs + t * cols + c0, q8.d + b, q8.sum + b);
    }
  }
}

// The kernel's steps for one (token, head) on the host: four warps of 32
// lanes, their reductions spelled out.
template <DType T>
void attention_host(const PagedAttentionArgs& a, Q8Dst q8, int t, int h) {
  const int D = a.head_dim;
  const int kvh = h / (a.n_heads / a.n_kv_heads);
  float q_s[kCudaAttentionMaxHeadDim];
  const float* q = a.q + t * a.q_stride + static_cast<int64_t>(h) * D;
  for (int i = 0; i < D; ++i) q_s[i] = q[i];
  const int32_t* table =
      a.block_table_flat + static_cast<int64_t>(a.token_seq[t]) * a.block_table_stride;
  const int32_t n_ctx = a.token_pos[t] + 1;
  float m_s[kWarps], l_s[kWarps];
  static thread_local float acc_s[kWarps][32][kMaxPerLane];
  for (int warp = 0; warp < kWarps; ++warp) {
    float m = -INFINITY, l = 0.0f;
    for (auto& lane_acc : acc_s[warp])
      for (float& v : lane_acc) v = 0.0f;
    for (int32_t p0 = warp * 32; p0 < n_ctx; p0 += kWarps * 32) {
      float s[32], pw[32];
      int64_t row[32];
      float s_max = -INFINITY;
      for (int lane = 0; lane < 32; ++lane) {
        s[lane] = lane_score<T>(a, table, kvh, q_s, p0 + lane, n_ctx, &row[lane]);
        s_max = fmaxf(s_max, s[lane]);
      }
      const float m_new = fmaxf(m, s_max);
      const float alpha = expf(m - m_new);
      for (int lane = 0; lane < 32; ++lane)
        pw[lane] = p0 + lane < n_ctx ? expf(s[lane] - m_new) : 0.0f;
      l = l * alpha + warp_sum_host(pw);
      const int cn = n_ctx - p0 < 32 ? n_ctx - p0 : 32;
      for (int lane = 0; lane < 32; ++lane) {
        for (float& v : acc_s[warp][lane]) v *= alpha;
        for (int j = 0; j < cn; ++j) lane_add_v<T>(a, acc_s[warp][lane], lane, pw[j], row[j]);
      }
      m = m_new;
    }
    m_s[warp] = m;
    l_s[warp] = l;
  }
  float f[kWarps], l_all;
  merge_factors(m_s, l_s, f, &l_all);
  float* out = a.out + t * a.out_stride + static_cast<int64_t>(h) * D;
  for (int d = 0; d < D; ++d) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += acc_s[w][d % 32][d / 32] * f[w];
    out[d] = v / l_all;
  }
  if (q8.qs) {
    const int64_t cols = static_cast<int64_t>(a.n_heads) * D;
    for (int d0 = 0; d0 < D; d0 += 32) {
      const int64_t c0 = static_cast<int64_t>(h) * D + d0, b = (t * cols + c0) / 32;
      quantize_block_host(out + d0, q8.qs + t * cols + c0, q8.d + b, q8.sum + b);
    }
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

namespace {

void validate_q8(const PagedAttentionArgs& a, const void* q8_dst) {
  if (q8_dst && (a.head_dim % 32 != 0 || reinterpret_cast<uintptr_t>(q8_dst) % 16 != 0))
    throw ConfigError(fmt::format(
        "CUDA attention: int8 output rows need a head size that is a multiple of 32 (got {}) "
        "and a 16-byte aligned buffer",
        a.head_dim));
}

}  // namespace

void paged_attention_host(const PagedAttentionArgs& a, void* q8_dst) {
  validate(a);
  validate_q8(a, q8_dst);
  const Q8Dst q8 = q8_dst_of(q8_dst, a);
  for (int t = 0; t < a.n_tokens; ++t)
    for (int h = 0; h < a.n_heads; ++h) {
      switch (a.kv_type) {
        case DType::F32:
          attention_host<DType::F32>(a, q8, t, h);
          break;
        case DType::F16:
          attention_host<DType::F16>(a, q8, t, h);
          break;
        default:
          attention_host<DType::Q8_0>(a, q8, t, h);
          break;
      }
    }
}

void paged_attention(const CudaDevice& dev, const PagedAttentionArgs& a, void* q8_dst) {
  validate(a);
  validate_q8(a, q8_dst);
  if (a.n_tokens == 0) return;
  dev.make_current();
  const dim3 grid(static_cast<unsigned>(a.n_tokens), static_cast<unsigned>(a.n_heads));
  const auto s = static_cast<cudaStream_t>(dev.stream());
  const Q8Dst q8 = q8_dst_of(q8_dst, a);
  switch (a.kv_type) {
    case DType::F32:
      attention_kernel<DType::F32><<<grid, kWarps * 32, 0, s>>>(a, q8);
      break;
    case DType::F16:
      attention_kernel<DType::F16><<<grid, kWarps * 32, 0, s>>>(a, q8);
      break;
    default:
      attention_kernel<DType::Q8_0><<<grid, kWarps * 32, 0, s>>>(a, q8);
      break;
  }
  check_launch("paged_attention", dev.index());
}

}  // namespace pagellm::cuda
