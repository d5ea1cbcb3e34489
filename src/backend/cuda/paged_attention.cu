#include "backend/cuda/paged_attention.h"

#include <fmt/format.h>

#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8_activations.h"
#include "backend/cuda/q8_block.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int32_t kPartition = kCudaAttentionPartition;
static_assert(kPartition % (kWarps * 32) == 0, "partitions of whole warp chunks");

// The sizes one instantiation of the kernels holds: query rows (K rows) of up
// to kRow floats in shared memory, and up to kValues value dims per head, a
// lane's dims lane + 32 i (i < kPerLane) in registers, a thread's merged dims
// tid + 128 k (k < kPerThread). Heads of up to 256 (Llama, Qwen, gpt-oss,
// Gemma's sliding layers) keep the small tier's registers; Gemma 4's global
// heads (512) and MLA's latent rows (576, values the first 512) take the large.
template <int R, int V>
struct Tier {
  static constexpr int kRow = R;
  static constexpr int kValues = V;
  static constexpr int kPerLane = V / 32;
  static constexpr int kPerThread = V / kThreads;
  static_assert(V % kThreads == 0 && V <= R, "whole lanes and threads of values");
};
using SmallHeads = Tier<256, 256>;
using LargeHeads = Tier<kCudaAttentionMaxHeadDim, kCudaAttentionMaxValueDim>;

// Calls f(Tier) for the (validated) shape's tier: the small one whenever the
// row fits it (then its values do too).
template <typename F>
void with_tier(const PagedAttentionArgs& a, F&& f) {
  if (a.head_dim <= SmallHeads::kRow)
    f(SmallHeads{});
  else
    f(LargeHeads{});
}

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

// Values per head: a latent cache's (a.v_dim > 0: the first v_dim elements of
// each K row, which is also its V row) or head_dim.
__host__ __device__ __forceinline__ int value_dim(const PagedAttentionArgs& a) {
  return a.v_dim > 0 ? a.v_dim : a.head_dim;
}

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
  const float score = dot_row<T>(a.k_cache, *row, q_s, a.head_dim) * a.scale;
  return a.softcap > 0.0f ? a.softcap * tanhf(score / a.softcap) : score;
}

// The first position token t attends to: its window's start (0 without one).
// Partitions start there, so no lane reads a block that left the window.
__host__ __device__ __forceinline__ int32_t first_pos(const PagedAttentionArgs& a, int t) {
  const int32_t p = a.token_pos[t] - a.window + 1;
  return a.window > 0 && p > 0 ? p : 0;
}

// Lane work 2: acc[i] += w * V[row][lane + 32 i], the lane's dims.
template <DType T, int PL>
__host__ __device__ __forceinline__ void lane_add_v(const PagedAttentionArgs& a, float (&acc)[PL],
                                                    int lane, float w, int64_t row) {
#pragma unroll
  for (int i = 0; i < PL; ++i) {
    const int d = lane + 32 * i;
    if (d < value_dim(a)) acc[i] += w * load_elem<T>(a.v_cache, row, a.head_dim, d);
  }
}

// The merge of the warps' partial softmaxes (max m_w, sum l_w) over one
// partition: each warp's factor f_w, the partition's max m_c and its sum l_c;
// its (unnormalized) output v[d] = sum_w acc_w[d] f_w (partition_output).
__host__ __device__ __forceinline__ void merge_factors(const float (&m_s)[kWarps],
                                                       const float (&l_s)[kWarps],
                                                       float (&f)[kWarps], float* m_c, float* l_c) {
  float m_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, m_s[w]);
  *l_c = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    f[w] = l_s[w] > 0.0f ? expf(m_s[w] - m_all) : 0.0f;
    *l_c = fma_rn(l_s[w], f[w], *l_c);
  }
  *m_c = m_all;
}

__host__ __device__ __forceinline__ float partition_output(const float (&acc_d)[kWarps],
                                                           const float (&f)[kWarps]) {
  float v = 0.0f;
  for (int w = 0; w < kWarps; ++w) v = fma_rn(acc_d[w], f[w], v);
  return v;
}

// The partitions of a context, merged in order into (M, L, A): the running
// max, sum and output of the partitions so far. One partition leaves
// exactly its own (m_c, l_c, v): a token's bits do not depend on whether its
// partitions ran in one thread block or in several.
template <int N>  // a thread's dims
struct Running {
  float m = -INFINITY, l = 0.0f;
  float a[N] = {};
};
template <int N>
__host__ __device__ __forceinline__ void merge_partition(Running<N>& r, float m_c, float l_c,
                                                         const float* v, int n) {
  const float m_new = fmaxf(r.m, m_c);
  const float f_old = expf(r.m - m_new), f_new = expf(m_c - m_new);
  r.l = fma_rn(r.l, f_old, PAGELLM_MUL_RN(l_c, f_new));
#pragma unroll
  for (int k = 0; k < N; ++k)  // fixed bounds: r.a stays in registers
    if (k < n) r.a[k] = fma_rn(r.a[k], f_old, PAGELLM_MUL_RN(v[k], f_new));
  r.m = m_new;
}

// A sink logit (a.sinks) joins the max and the sum with no value: merged as
// one more partition of max s, sum 1 and output 0, after all the others.
template <int N>
__host__ __device__ __forceinline__ void merge_sink(const PagedAttentionArgs& a, int h,
                                                    Running<N>& r, int n) {
  if (!a.sinks) return;
  const float zero[N] = {};
  merge_partition(r, a.sinks[h], 1.0f, zero, n);
}

// Where the output rows go as int8 activations (qs == nullptr: nowhere).
struct Q8Dst {
  int8_t* qs = nullptr;
  float* d = nullptr;
  int32_t* sum = nullptr;
};

Q8Dst q8_dst_of(void* dst, const PagedAttentionArgs& a) {
  if (!dst) return {};
  const Q8ActView v = q8_act_view(dst, a.n_tokens, static_cast<int64_t>(a.n_heads) * value_dim(a));
  return {const_cast<int8_t*>(v.qs), const_cast<float*>(v.d), const_cast<int32_t*>(v.sum)};
}

// Partials of the split launch: [n_tokens][n_heads][parts][value dims + 2]
// f32, a partition's v[0 .. value_dim), then m_c, l_c.
__host__ __device__ __forceinline__ int64_t partial_floats(const PagedAttentionArgs& a) {
  return value_dim(a) + 2;
}
__host__ __device__ __forceinline__ float* partial_at(const PagedAttentionArgs& a,
                                                      const AttentionSplit& sp, int t, int h,
                                                      int z) {
  return sp.partials +
         ((static_cast<int64_t>(t) * a.n_heads + h) * sp.parts + z) * partial_floats(a);
}

// Thread block work shared by the kernels: one partition [p0, p1) of token
// t's context for head h, its warps' online softmaxes merged; thread `tid`
// gets v for its dims d = tid + 128 k (k < n_dims), and (m_c, l_c).
template <class Tr>
struct Shared {
  float q[Tr::kRow];
  float m[kWarps], l[kWarps];
  float acc[kWarps][Tr::kValues];
};

template <DType T, class Tr>
__device__ __forceinline__ void partition_device(const PagedAttentionArgs& a, const int32_t* table,
                                                 int kvh, int32_t p0, int32_t p1, Shared<Tr>& sh,
                                                 float (&v)[Tr::kPerThread], float* m_c,
                                                 float* l_c) {
  constexpr int PL = Tr::kPerLane;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float m = -INFINITY, l = 0.0f;
  float acc[PL];
#pragma unroll
  for (int i = 0; i < PL; ++i) acc[i] = 0.0f;
  for (int32_t c0 = p0 + warp * 32; c0 < p1; c0 += kWarps * 32) {
    int64_t row;
    const float s = lane_score<T>(a, table, kvh, sh.q, c0 + lane, p1, &row);
    const float m_new = fmaxf(m, warp_max(s));  // finite: lane 0's position exists
    const float alpha = expf(m - m_new);        // 0 on the first chunk
    const float pw = c0 + lane < p1 ? expf(s - m_new) : 0.0f;
    l = l * alpha + warp_sum(pw);
#pragma unroll
    for (int i = 0; i < PL; ++i) acc[i] *= alpha;
    const int cn = min(32, p1 - c0);
    for (int j = 0; j < cn; ++j)
      lane_add_v<T>(a, acc, lane, __shfl_sync(0xffffffffu, pw, j),
                    __shfl_sync(0xffffffffu, row, j));
    m = m_new;
  }
  if (lane == 0) {
    sh.m[warp] = m;
    sh.l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < PL; ++i) {
    const int d = lane + 32 * i;
    if (d < value_dim(a)) sh.acc[warp][d] = acc[i];
  }
  __syncthreads();
  float f[kWarps];
  merge_factors(sh.m, sh.l, f, m_c, l_c);
#pragma unroll
  for (int k = 0; k < Tr::kPerThread; ++k) {
    const int d = threadIdx.x + kThreads * k;
    if (d >= value_dim(a)) break;
    float acc_d[kWarps];
    for (int w = 0; w < kWarps; ++w) acc_d[w] = sh.acc[w][d];
    v[k] = partition_output(acc_d, f);
  }
  __syncthreads();  // the next partition overwrites sh
}

// out (and its int8 row) = A / L for thread's dims. Warp w writes dims 32 w ..
// 32 w + 32 (+ 128): with head_dim a multiple of 32, whole blocks of the int8
// row, whose lanes quantize them together.
template <int N>
__device__ __forceinline__ void write_output(const PagedAttentionArgs& a, Q8Dst q8, int t, int h,
                                             const Running<N>& r) {
  const int D = value_dim(a), lane = threadIdx.x % 32;
  float* out = a.out + t * a.out_stride + static_cast<int64_t>(h) * D;
  const int64_t cols = static_cast<int64_t>(a.n_heads) * D;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int d = threadIdx.x + kThreads * k;
    if (d >= D) break;
    const float v = r.a[k] / r.l;
    out[d] = v;
    if (q8.qs) {
      const int64_t c0 = static_cast<int64_t>(h) * D + (d - lane), b = (t * cols + c0) / 32;
      quantize_lanes(v, lane, q8.qs + t * cols + c0, q8.d + b, q8.sum + b);
    }
  }
}

__device__ __forceinline__ int n_dims(int D) {
  return D > static_cast<int>(threadIdx.x) ? (D - 1 - static_cast<int>(threadIdx.x)) / kThreads + 1
                                           : 0;
}

// Token t, head h: every partition of the context in turn (sp.parts == 1),
// or partition blockIdx.z alone into sp.partials (the split launch; a
// partition past the token's context does nothing).
template <DType T, class Tr>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(PagedAttentionArgs a, Q8Dst q8, AttentionSplit sp) {
  constexpr int N = Tr::kPerThread;
  pdl_start();
  const int t = blockIdx.x, h = blockIdx.y;
  const int D = a.head_dim, DV = value_dim(a);
  const int kvh = h / (a.n_heads / a.n_kv_heads);
  __shared__ Shared<Tr> sh;
  const int32_t n_ctx = a.token_pos[t] + 1, first = first_pos(a, t);
  const int32_t z = static_cast<int32_t>(blockIdx.z);
  if (sp.parts > 1 && first + z * kPartition >= n_ctx) return;

  const float* q = a.q + t * a.q_stride + static_cast<int64_t>(h) * D;
  for (int i = threadIdx.x; i < D; i += kThreads) sh.q[i] = q[i];
  __syncthreads();
  const int32_t* table =
      a.block_table_flat + static_cast<int64_t>(a.token_seq[t]) * a.block_table_stride;
  const int nd = n_dims(value_dim(a));
  // One call site of partition_device for both launches: the same code, so
  // the same bits.
  const int32_t z_begin = sp.parts > 1 ? z : 0;
  const int32_t z_end = sp.parts > 1 ? z + 1 : (n_ctx - first + kPartition - 1) / kPartition;
  Running<N> r;
  for (int32_t zi = z_begin; zi < z_end; ++zi) {
    const int32_t p0 = first + zi * kPartition;
    float v[N], m_c, l_c;
    partition_device<T, Tr>(a, table, kvh, p0, min(p0 + kPartition, n_ctx), sh, v, &m_c, &l_c);
    if (sp.parts == 1) {
      merge_partition(r, m_c, l_c, v, nd);
      continue;
    }
    float* part = partial_at(a, sp, t, h, zi);
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k < nd) part[threadIdx.x + kThreads * k] = v[k];
    if (threadIdx.x == 0) {
      part[DV] = m_c;
      part[DV + 1] = l_c;
    }
  }
  if (sp.parts == 1) {
    merge_sink(a, h, r, nd);
    write_output(a, q8, t, h, r);
  }
}

// The split launch's second half: token t, head h's partitions merged in
// order, as attention_kernel merges them in one thread block.
template <class Tr>
__global__ void __launch_bounds__(kThreads)
    merge_partitions_kernel(PagedAttentionArgs a, Q8Dst q8, AttentionSplit sp) {
  constexpr int N = Tr::kPerThread;
  pdl_start();
  const int t = blockIdx.x, h = blockIdx.y, DV = value_dim(a);
  const int32_t n_ctx = a.token_pos[t] + 1, first = first_pos(a, t);
  const int nd = n_dims(DV);
  Running<N> r;
  for (int32_t z = 0; z < sp.parts && first + z * kPartition < n_ctx; ++z) {
    const float* part = partial_at(a, sp, t, h, z);
    float v[N];
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k < nd) v[k] = part[threadIdx.x + kThreads * k];
    merge_partition(r, part[DV], part[DV + 1], v, nd);
  }
  merge_sink(a, h, r, nd);
  write_output(a, q8, t, h, r);
}

// The kernel's steps for one (token, head) on the host: each partition's four
// warps of 32 lanes, their reductions spelled out, then the partitions'
// merge.
template <DType T, class Tr>
void attention_host(const PagedAttentionArgs& a, Q8Dst q8, int t, int h) {
  constexpr int PL = Tr::kPerLane, N = Tr::kPerThread;
  const int D = a.head_dim, DV = value_dim(a);
  const int kvh = h / (a.n_heads / a.n_kv_heads);
  float q_s[Tr::kRow];
  const float* q = a.q + t * a.q_stride + static_cast<int64_t>(h) * D;
  for (int i = 0; i < D; ++i) q_s[i] = q[i];
  const int32_t* table =
      a.block_table_flat + static_cast<int64_t>(a.token_seq[t]) * a.block_table_stride;
  const int32_t n_ctx = a.token_pos[t] + 1;
  // Running merges of the 128 threads (thread tid: dims tid + 128 k).
  std::vector<Running<N>> run(kThreads);
  static thread_local float acc_s[kWarps][32][PL];
  for (int32_t p0 = first_pos(a, t); p0 < n_ctx; p0 += kPartition) {
    const int32_t p1 = p0 + kPartition < n_ctx ? p0 + kPartition : n_ctx;
    float m_s[kWarps], l_s[kWarps];
    for (int warp = 0; warp < kWarps; ++warp) {
      float m = -INFINITY, l = 0.0f;
      for (auto& lane_acc : acc_s[warp])
        for (float& v : lane_acc) v = 0.0f;
      for (int32_t c0 = p0 + warp * 32; c0 < p1; c0 += kWarps * 32) {
        float s[32], pw[32];
        int64_t row[32];
        float s_max = -INFINITY;
        for (int lane = 0; lane < 32; ++lane) {
          s[lane] = lane_score<T>(a, table, kvh, q_s, c0 + lane, p1, &row[lane]);
          s_max = fmaxf(s_max, s[lane]);
        }
        const float m_new = fmaxf(m, s_max);
        const float alpha = expf(m - m_new);
        for (int lane = 0; lane < 32; ++lane)
          pw[lane] = c0 + lane < p1 ? expf(s[lane] - m_new) : 0.0f;
        l = l * alpha + warp_sum_host(pw);
        const int cn = p1 - c0 < 32 ? p1 - c0 : 32;
        for (int lane = 0; lane < 32; ++lane) {
          for (float& v : acc_s[warp][lane]) v *= alpha;
          for (int j = 0; j < cn; ++j) lane_add_v<T>(a, acc_s[warp][lane], lane, pw[j], row[j]);
        }
        m = m_new;
      }
      m_s[warp] = m;
      l_s[warp] = l;
    }
    float f[kWarps], m_c, l_c;
    merge_factors(m_s, l_s, f, &m_c, &l_c);
    for (int tid = 0; tid < kThreads; ++tid) {
      float v[N];
      int nd = 0;
      for (int d = tid; d < DV; d += kThreads, ++nd) {
        float acc_d[kWarps];
        for (int w = 0; w < kWarps; ++w) acc_d[w] = acc_s[w][d % 32][d / 32];
        v[nd] = partition_output(acc_d, f);
      }
      merge_partition(run[tid], m_c, l_c, v, nd);
    }
  }
  for (int tid = 0; tid < kThreads; ++tid)
    merge_sink(a, h, run[tid], tid < DV ? (DV - 1 - tid) / kThreads + 1 : 0);
  float* out = a.out + t * a.out_stride + static_cast<int64_t>(h) * DV;
  for (int d = 0; d < DV; ++d) {
    const Running<N>& r = run[d % kThreads];
    out[d] = r.a[d / kThreads] / r.l;
  }
  if (q8.qs) {
    const int64_t cols = static_cast<int64_t>(a.n_heads) * DV;
    for (int d0 = 0; d0 < DV; d0 += 32) {
      const int64_t c0 = static_cast<int64_t>(h) * DV + d0, b = (t * cols + c0) / 32;
      quantize_block_host(out + d0, q8.qs + t * cols + c0, q8.d + b, q8.sum + b);
    }
  }
}

}  // namespace

void validate(const PagedAttentionArgs& a) {
  if (a.kv_type != DType::F16 && a.kv_type != DType::F32 && a.kv_type != DType::Q8_0)
    throw ConfigError(fmt::format("CUDA attention: unsupported KV type '{}' (f16, f32, q8_0)",
                                  dtype_name(a.kv_type)));
  if (a.head_dim <= 0 || a.head_dim > kCudaAttentionMaxHeadDim ||
      value_dim(a) > kCudaAttentionMaxValueDim)
    throw ConfigError(fmt::format(
        "CUDA attention: head size {} with {} values (rows of 1..{}, at most {} values supported)",
        a.head_dim, value_dim(a), kCudaAttentionMaxHeadDim, kCudaAttentionMaxValueDim));
  if (a.kv_type == DType::Q8_0 && a.head_dim % QK8_0 != 0)
    throw ConfigError(fmt::format(
        "CUDA attention: a q8_0 cache needs a head size that is a multiple of 32 (got {})",
        a.head_dim));
  if (a.n_kv_heads <= 0 || a.n_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    throw ConfigError(
        fmt::format("CUDA attention: {} query heads for {} KV heads", a.n_heads, a.n_kv_heads));
  if (a.v_dim < 0 || a.v_dim > a.head_dim || (a.v_dim > 0 && a.n_kv_heads != 1))
    throw ConfigError(fmt::format(
        "CUDA attention: a latent cache of {} values in rows of {} for {} KV heads (one KV head, "
        "values at most the row)",
        a.v_dim, a.head_dim, a.n_kv_heads));
  if (a.block_size <= 0 || a.n_tokens < 0 || a.n_heads > 65535)
    throw ConfigError(fmt::format("CUDA attention: bad shape (block size {}, {} tokens)",
                                  a.block_size, a.n_tokens));
}

namespace {

void validate_q8(const PagedAttentionArgs& a, const void* q8_dst) {
  if (q8_dst && (value_dim(a) % 32 != 0 || reinterpret_cast<uintptr_t>(q8_dst) % 16 != 0))
    throw ConfigError(fmt::format(
        "CUDA attention: int8 output rows need a head size that is a multiple of 32 (got {}) "
        "and a 16-byte aligned buffer",
        value_dim(a)));
}

}  // namespace

void paged_attention_host(const PagedAttentionArgs& a, void* q8_dst) {
  validate(a);
  validate_q8(a, q8_dst);
  const Q8Dst q8 = q8_dst_of(q8_dst, a);
  with_tier(a, [&](auto tier) {
    using Tr = decltype(tier);
    with_cache_type(a.kv_type, [&](auto T) {
      for (int t = 0; t < a.n_tokens; ++t)
        for (int h = 0; h < a.n_heads; ++h) attention_host<T.value, Tr>(a, q8, t, h);
    });
  });
}

int32_t attention_partitions(const PagedAttentionArgs& a) {
  const int64_t max_ctx = static_cast<int64_t>(a.block_table_stride) * a.block_size;
  const int64_t parts = (max_ctx + kPartition - 1) / kPartition;
  if (parts <= 1 || parts > 65535 ||
      static_cast<int64_t>(a.n_tokens) * a.n_heads >= kCudaAttentionSplitBelow ||
      attention_workspace_bytes(a, static_cast<int32_t>(parts)) > kCudaAttentionMaxWorkspace)
    return 1;
  return static_cast<int32_t>(parts);
}

size_t attention_workspace_bytes(const PagedAttentionArgs& a, int32_t parts) {
  if (parts <= 1) return 0;
  return static_cast<size_t>(a.n_tokens) * a.n_heads * parts * partial_floats(a) * sizeof(float);
}

void paged_attention(const CudaDevice& dev, const PagedAttentionArgs& a, void* q8_dst,
                     AttentionSplit split) {
  validate(a);
  validate_q8(a, q8_dst);
  if (split.parts < 1 || split.parts > 65535 || (split.parts > 1 && !split.partials))
    throw ConfigError(fmt::format(
        "CUDA attention: a split into {} partitions without room for them", split.parts));
  if (a.n_tokens == 0) return;
  dev.make_current();
  const dim3 grid(static_cast<unsigned>(a.n_tokens), static_cast<unsigned>(a.n_heads),
                  static_cast<unsigned>(split.parts));
  const Q8Dst q8 = q8_dst_of(q8_dst, a);
  with_tier(a, [&](auto tier) {
    using Tr = decltype(tier);
    with_cache_type(a.kv_type, [&](auto T) {
      launch_pdl(dev, "paged_attention", attention_kernel<T.value, Tr>, grid, dim3(kThreads), 0,
                 a, q8, split);
    });
    if (split.parts == 1) return;
    launch_pdl(dev, "paged_attention (merge)", merge_partitions_kernel<Tr>, dim3(grid.x, grid.y),
               dim3(kThreads), 0, a, q8, split);
  });
}

}  // namespace pagellm::cuda
