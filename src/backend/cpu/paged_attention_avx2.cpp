// The AVX2 paged-attention kernel (paged_attention_kernels.h): CPUs without
// AVX-512 (most client x86-64 parts) and caches or head sizes the AVX-512
// kernels do not specialise.
//
// Per (tile, KV head) and chunk of kAttnChunk positions, in this order (a
// tile: up to kTileTokens consecutive prompt tokens of one sequence):
//   K, V rows of the chunk widened to f32 (kf, vf: [position][head_dim])
//   per token of the tile that reaches the chunk, per query head g of the GQA group:
//     u_j = sum over v of q[8v..8v+7] * k_j[8v..8v+7] (lane vectors, v in order)
//     s_j = lane sum of u_j by one fixed tree (eight positions per tree) * scale
//     m' = max(m, max_j s_j); acc, l scaled by exp(m - m') when m' > m
//     p_j = exp8(s_j - m'); l += (p_0..7 + p_8..15) summed by hsum
//     acc += p_j * v_j, position by position
// Every token takes the same steps whatever the batch, so the output is
// batch-invariant; the values differ from the other variants in rounding only.
#include "backend/cpu/paged_attention_kernels.h"

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace pagellm::cpu::detail {

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2

namespace {

constexpr int kChunk = kAttnChunk;
constexpr int kPrefetchChunks = 2;  // rows hinted this many chunks ahead
// Prompt tokens per tile: each chunk's rows are widened once for the tile
// (widening costs about as much as one token's arithmetic on them).
constexpr int kTileTokens = 4;

// Lane j of the result: the sum of u[j]'s eight lanes, as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
inline __m256 lane_sums8(const __m256 (&u)[8]) {
  const __m256 q0123 = _mm256_hadd_ps(_mm256_hadd_ps(u[0], u[1]), _mm256_hadd_ps(u[2], u[3]));
  const __m256 q4567 = _mm256_hadd_ps(_mm256_hadd_ps(u[4], u[5]), _mm256_hadd_ps(u[6], u[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0123, q4567, 0x20),
                       _mm256_permute2f128_ps(q0123, q4567, 0x31));
}

// Unscaled scores of the eight positions whose f32 K rows start at kf (row
// stride d), for the query q of 8 * dv floats.
inline __m256 scores8(const float* q, const float* kf, int d, int dv) {
  __m256 u[8];
  for (int j = 0; j < 8; ++j) u[j] = _mm256_setzero_ps();
  for (int v = 0; v < dv; ++v) {
    const __m256 qv = _mm256_loadu_ps(q + 8 * v);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      u[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kf + j * d + 8 * v), u[j]);
  }
  return lane_sums8(u);
}

// acc[0 .. 8 NV) += p_j * vf[j][0 .. 8 NV) for j < cn, in position order.
template <int NV>
inline void weigh_slice(float* acc, const float* vf, int d, const float* pw, int cn) {
  __m256 o[NV];
  for (int i = 0; i < NV; ++i) o[i] = _mm256_loadu_ps(acc + 8 * i);
  for (int j = 0; j < cn; ++j) {
    const __m256 p = _mm256_broadcast_ss(pw + j);
    const float* vr = vf + j * d;
    for (int i = 0; i < NV; ++i) o[i] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 8 * i), o[i]);
  }
  for (int i = 0; i < NV; ++i) _mm256_storeu_ps(acc + 8 * i, o[i]);
}

// The whole row of d = 8 * dv floats in slices of up to eight registers.
inline void weigh(float* acc, const float* vf, int d, const float* pw, int cn) {
  const int dv = d / 8;
  int v = 0;
  for (; v + 8 <= dv; v += 8) weigh_slice<8>(acc + 8 * v, vf + 8 * v, d, pw, cn);
  float* a = acc + 8 * v;
  const float* s = vf + 8 * v;
  switch (dv - v) {
    case 1:
      return weigh_slice<1>(a, s, d, pw, cn);
    case 2:
      return weigh_slice<2>(a, s, d, pw, cn);
    case 3:
      return weigh_slice<3>(a, s, d, pw, cn);
    case 4:
      return weigh_slice<4>(a, s, d, pw, cn);
    case 5:
      return weigh_slice<5>(a, s, d, pw, cn);
    case 6:
      return weigh_slice<6>(a, s, d, pw, cn);
    case 7:
      return weigh_slice<7>(a, s, d, pw, cn);
    default:
      return;
  }
}

inline void scale_row(float* x, int d, float c) {
  const __m256 cv = _mm256_set1_ps(c);
  for (int i = 0; i < d; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), cv));
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One chunk (cn positions, K and V rows in kf / vf) for one query head: its
// state acc (d floats), m, l.
inline void chunk_head(const float* q, const float* kf, const float* vf, int d, int cn, float scale,
                       float* acc, float& m, float& l) {
  const int dv = d / 8;
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  const __m256i n = _mm256_set1_epi32(cn);
  const __m256 sc = _mm256_set1_ps(scale);
  // Positions past cn hold stale rows: computed, then masked to -inf.
  __m256 s_lo = _mm256_mul_ps(scores8(q, kf, d, dv), sc);
  s_lo = _mm256_blendv_ps(
      ninf, s_lo,
      _mm256_castsi256_ps(_mm256_cmpgt_epi32(n, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
  __m256 s_hi = ninf;
  if (cn > 8) {
    s_hi = _mm256_mul_ps(scores8(q, kf + 8 * d, d, dv), sc);
    s_hi = _mm256_blendv_ps(ninf, s_hi,
                            _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                n, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15))));
  }
  const float cmax = hmax(_mm256_max_ps(s_lo, s_hi));
  if (cmax > m) {
    const float corr = std::exp(m - cmax);  // 0 on the first chunk
    l *= corr;
    scale_row(acc, d, corr);
    m = cmax;
  }
  const __m256 mv = _mm256_set1_ps(m);
  const __m256 p_lo = simd::exp8(_mm256_sub_ps(s_lo, mv));
  const __m256 p_hi = simd::exp8(_mm256_sub_ps(s_hi, mv));  // 0 past cn
  alignas(32) float pw[kChunk];
  _mm256_store_ps(pw, p_lo);
  _mm256_store_ps(pw + 8, p_hi);
  l += simd::hsum(_mm256_add_ps(p_lo, p_hi));
  weigh(acc, vf, d, pw, cn);
}

// Head row `row` (= slot * n_kv_heads + kv_head) of a cache of `type` (F16,
// F32, Q8_0) as n floats (n a multiple of 8; of 32 for Q8_0).
void widen_row_avx2(const void* base, DType type, int64_t row, int n, float* dst) {
  if (type == DType::Q8_0) {
    const auto* blk = static_cast<const BlockQ8_0*>(base) + row * (n / QK8_0);
    for (int b = 0; b < n / QK8_0; ++b) {
      const __m256 d = simd::bcast_f16(&blk[b].d);
      for (int i = 0; i < QK8_0; i += 8) {
        const __m256i q =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk[b].qs + i)));
        _mm256_storeu_ps(dst + b * QK8_0 + i, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
      }
    }
    return;
  }
  if (type == DType::F32) {
    std::memcpy(dst, static_cast<const float*>(base) + row * n, sizeof(float) * n);
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(base) + row * n;
  for (int i = 0; i < n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(simd::load128(src + i)));
}

}  // namespace

void attention_avx2(const PagedAttentionArgs& a, ThreadPool& pool) {
  const int group = a.n_heads / a.n_kv_heads;
  const int d = a.head_dim;
  const size_t row_bytes = dtype_row_bytes(a.kv_type, d);
  const auto* kb = static_cast<const char*>(a.k_cache);
  const auto* vb = static_cast<const char*>(a.v_cache);
  const size_t gd = static_cast<size_t>(group) * d;

  // Tiles: runs of up to kTileTokens consecutive tokens of one sequence (a
  // prompt's), which share each chunk's widened K and V rows.
  std::vector<int32_t> tiles;  // first token of each tile, then n_tokens
  for (int32_t t = 0; t < a.n_tokens;) {
    tiles.push_back(t);
    const int32_t seq = a.token_seq[t];
    for (++t; t < a.n_tokens && t - tiles.back() < kTileTokens && a.token_seq[t] == seq;) ++t;
  }
  tiles.push_back(a.n_tokens);
  const int64_t work = static_cast<int64_t>(tiles.size() - 1) * a.n_kv_heads;

  pool.parallel_for(work, [&](int64_t begin, int64_t end, int) {
    // Zeroed: rows past a chunk's end are read (and masked) before any is written.
    std::vector<float> kf(static_cast<size_t>(kChunk) * d), vf(kf.size());
    // State of (tile token i, head h of the run, query head g): ((i * nh + h) * group + g).
    const size_t states = static_cast<size_t>(kTileTokens) * a.n_kv_heads * group;
    std::vector<float> acc(states * d), m(states), l(states);
    // The items of one tile (its KV heads kvh0 .. kvh0 + nh - 1 here) go
    // through the positions together, chunk by chunk: a slot holds the rows
    // of every KV head side by side, so the run reads nh rows in a row
    // instead of one row per slot per pass (a stride that left Zen 3 at 3 GB/s).
    // Each (token, query head) takes the steps it takes alone.
    for (int64_t w0 = begin; w0 < end;) {
      const int64_t tile = w0 / a.n_kv_heads;
      const int kvh0 = static_cast<int>(w0 % a.n_kv_heads);
      const int nh = static_cast<int>(std::min<int64_t>(end - w0, a.n_kv_heads - kvh0));
      const int32_t t0 = tiles[tile];
      const int nt = tiles[tile + 1] - t0;
      const int32_t* table = a.block_tables[a.token_seq[t0]];
      int32_t n_ctx[kTileTokens];
      int32_t max_ctx = 0;
      for (int i = 0; i < nt; ++i) max_ctx = std::max(max_ctx, n_ctx[i] = a.token_pos[t0 + i] + 1);
      const size_t used = static_cast<size_t>(nt) * nh * group;
      std::fill(acc.begin(), acc.begin() + static_cast<int64_t>(used * d), 0.0f);
      std::fill(m.begin(), m.begin() + static_cast<int64_t>(used), -INFINITY);
      std::fill(l.begin(), l.begin() + static_cast<int64_t>(used), 0.0f);
      const size_t span = static_cast<size_t>(nh) * row_bytes;  // the run's bytes of a slot
      for (int32_t p0 = 0; p0 < max_ctx; p0 += kChunk) {
        const int cn = std::min<int32_t>(kChunk, max_ctx - p0);
        int64_t row[kChunk];  // head 0's row of each position's slot
        slot_offsets(a, table, p0, cn, 1, row);
        // The run's rows a few chunks ahead, into L2, while this chunk computes.
        const int32_t pf0 = p0 + kPrefetchChunks * kChunk;
        const int pn = std::max(0, std::min<int32_t>(kChunk, max_ctx - pf0));
        if (pn > 0) {
          int64_t pf[kChunk];
          slot_offsets(a, table, pf0, pn, 1, pf);
          for (int j = 0; j < pn; ++j) {
            const size_t o = static_cast<size_t>(pf[j] + kvh0) * row_bytes;
            for (size_t b = 0; b < span; b += 64) {
              simd::prefetch(kb + o + b);
              simd::prefetch(vb + o + b);
            }
            if (span % 64 != 0) {  // a run that ends in one more line
              simd::prefetch(kb + o + span - 1);
              simd::prefetch(vb + o + span - 1);
            }
          }
        }
        for (int h = 0; h < nh; ++h) {
          for (int j = 0; j < cn; ++j) {
            widen_row_avx2(a.k_cache, a.kv_type, row[j] + kvh0 + h, d, kf.data() + j * d);
            widen_row_avx2(a.v_cache, a.kv_type, row[j] + kvh0 + h, d, vf.data() + j * d);
          }
          for (int i = 0; i < nt; ++i) {
            if (p0 >= n_ctx[i]) continue;
            const int ci = std::min<int32_t>(kChunk, n_ctx[i] - p0);
            const float* q0 = a.q + (t0 + i) * a.q_stride + static_cast<size_t>(kvh0 + h) * gd;
            const size_t s0 = (static_cast<size_t>(i) * nh + h) * group;
            for (int g = 0; g < group; ++g)
              chunk_head(q0 + g * d, kf.data(), vf.data(), d, ci, a.scale,
                         acc.data() + (s0 + g) * d, m[s0 + g], l[s0 + g]);
          }
        }
      }
      for (int i = 0; i < nt; ++i)
        for (int h = 0; h < nh; ++h)
          for (int g = 0; g < group; ++g) {
            const size_t si = (static_cast<size_t>(i) * nh + h) * group + g;
            const float lg = l[si];
            float* o =
                a.out + (t0 + i) * a.out_stride + (static_cast<int64_t>(kvh0 + h) * group + g) * d;
            const __m256 inv = _mm256_set1_ps(lg > 0 ? 1.0f / lg : 0.0f);
            const float* ag = acc.data() + si * d;
            for (int k = 0; k < d; k += 8)
              _mm256_storeu_ps(o + k, _mm256_mul_ps(_mm256_loadu_ps(ag + k), inv));
          }
      w0 += nh;
    }
  });
}

PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

}  // namespace pagellm::cpu::detail
