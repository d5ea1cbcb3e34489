// The latent (MLA) attention kernel's planning: work units of (token, head
// vectors, segments), a decode token in a batch of few spread over the
// threads by segment (its segments' states kept, then folded in order), and
// the per-ISA body (paged_attention_latent_body.inc).
#include "backend/cpu/paged_attention_latent.h"

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <cstring>
#include <vector>

#include "backend/cpu/lanes.h"
#include "backend/cpu/paged_attention_kernels.h"
#include "tensor/blocks.h"
#include "tensor/convert.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace pagellm {
namespace {

constexpr int kChunk = cpu::detail::kAttnChunk;
constexpr int kSegment = cpu::detail::kLatentSegment;
// At most this many floats of split tokens' segment states (16 MiB); past it
// a token folds its segments in its own units (the same bits).
constexpr size_t kMaxPartFloats = size_t{4} << 20;
// Query heads per work unit, at most: a unit converts each row once for all
// of them (more heads share it), but its query and state arrays grow.
constexpr int kMaxUnitHeads = 64;

struct LatentUnit {
  int32_t t, hv0, nhv, s0, s1;  // token, head vectors [hv0, hv0 + nhv), segments [s0, s1)
};
// A cache row's n values as f32 (exact for every cache type: an f16, or a
// q8_0 block's scale times an int8, is a float).
using RowToF32 = void (*)(const void* row, float* dst, int n);

void f32_row(const void* row, float* dst, int n) { std::memcpy(dst, row, sizeof(float) * n); }
void f16_row(const void* row, float* dst, int n) { dequantize_row(DType::F16, row, dst, n); }
void q8_row(const void* row, float* dst, int n) { dequantize_row(DType::Q8_0, row, dst, n); }
#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// q8_0 eight values at a time (the generic loop is a large part of a latent
// chunk's work: a row is converted once for up to 64 heads, but read by few).
void q8_row_avx2(const void* row, float* dst, int n) {
  const auto* b = static_cast<const BlockQ8_0*>(row);
  for (int k = 0; k < n / QK8_0; ++k, dst += QK8_0) {
    const __m256 d = cpu::simd::bcast_f16(&b[k].d);
    for (int v = 0; v < QK8_0 / 8; ++v) {
      const __m256i q = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[k].qs + 8 * v)));
      _mm256_storeu_ps(dst + 8 * v, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
    }
  }
}
PAGELLM_TARGET_END
#endif

struct LatentJob {
  const PagedAttentionArgs* a = nullptr;
  RowToF32 row_to_f32 = nullptr;
  int d = 0, dv = 0, n_hv = 0, hv_per_unit = 0;
  std::vector<LatentUnit> units;
  std::vector<int64_t> part_base;  // per token: its first segment's state in parts, or -1
  std::vector<int32_t> split_tokens;
  float* parts = nullptr;  // [segment][head vector] states of the split tokens
};

#define PAGELLM_LANES_BODY "backend/cpu/paged_attention_latent_body.inc"
#define PAGELLM_LANES_ENTRY latent_run
#include "backend/cpu/lanes_variants.inc"

}  // namespace

namespace cpu::detail {

void latent_attention(const PagedAttentionArgs& a, ThreadPool& pool, CpuIsa isa) {
  if (isa == CpuIsa::Scalar)
    throw Error("latent_attention: the scalar variant is paged_attention's own loop");
  const auto run = lanes_entry(isa, "latent_attention");
  if (a.v_dim <= 0 || a.v_dim > a.head_dim || a.n_kv_heads != 1 || a.window > 0 || a.softcap > 0)
    throw Error("latent_attention: needs a latent cache (0 < v_dim <= head_dim, one KV head), "
                "no window or soft cap");
  if (a.kv_type != DType::F32 && a.kv_type != DType::F16 && a.kv_type != DType::Q8_0)
    throw Error(std::string("latent_attention: no ") + dtype_name(a.kv_type) + " cache");
  if (a.n_tokens <= 0) return;
  const int width = isa == CpuIsa::Avx512 ? 16 : 8;
  LatentJob job;
  job.a = &a;
  job.row_to_f32 = a.kv_type == DType::F32 ? f32_row : a.kv_type == DType::F16 ? f16_row : q8_row;
#if PAGELLM_HAVE_AVX2
  if (a.kv_type == DType::Q8_0) job.row_to_f32 = q8_row_avx2;  // isa >= Avx2 here
#endif
  job.d = a.head_dim;
  job.dv = a.v_dim;
  job.n_hv = (a.n_heads + width - 1) / width;
  job.hv_per_unit = std::min(job.n_hv, std::max(1, kMaxUnitHeads / width));
  const int blocks = (job.n_hv + job.hv_per_unit - 1) / job.hv_per_unit;
  // A batch of few units: each token's segments are units of their own.
  const bool split = pool.size() > 1 && int64_t{a.n_tokens} * blocks < 2 * int64_t{pool.size()};
  const size_t sf = static_cast<size_t>(a.v_dim + 2) * width;
  job.part_base.assign(static_cast<size_t>(a.n_tokens), -1);
  int64_t n_parts = 0;  // segments kept
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    const int32_t ns = (a.token_pos[t] + kSegment) / kSegment;
    const bool apart = split && ns > 1 &&
                       static_cast<size_t>(n_parts + ns) * job.n_hv * sf <= kMaxPartFloats;
    if (apart) job.part_base[t] = n_parts, n_parts += ns, job.split_tokens.push_back(t);
    for (int32_t hv = 0; hv < job.n_hv; hv += job.hv_per_unit) {
      const int32_t nhv = std::min(job.hv_per_unit, job.n_hv - hv);
      if (apart)
        for (int32_t s = 0; s < ns; ++s) job.units.push_back({t, hv, nhv, s, s + 1});
      else
        job.units.push_back({t, hv, nhv, 0, ns});
    }
  }
  thread_local std::vector<float> parts;  // kept: decode calls this per layer
  if (parts.size() < static_cast<size_t>(n_parts) * job.n_hv * sf)
    parts.resize(static_cast<size_t>(n_parts) * job.n_hv * sf);
  job.parts = parts.data();
  pool.parallel_for(static_cast<int64_t>(job.units.size()),
                    [&](int64_t begin, int64_t end, int) { run(job, 0, begin, end); });
  if (!job.split_tokens.empty())
    pool.parallel_for(static_cast<int64_t>(job.split_tokens.size()) * job.n_hv,
                      [&](int64_t begin, int64_t end, int) { run(job, 1, begin, end); });
}

}  // namespace cpu::detail
}  // namespace pagellm
