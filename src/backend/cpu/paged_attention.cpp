#include "backend/cpu/paged_attention.h"

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/paged_attention_kernels.h"
#include "backend/cpu/paged_attention_latent.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/convert.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm {

namespace {

// Loads head row `row` (= slot * n_kv_heads + kv_head) of n elements into f32.
inline void load_row(const void* base, DType type, int64_t row, int n, float* dst) {
  if (type == DType::Q8_0) {
    const auto* blk = static_cast<const BlockQ8_0*>(base) + row * (n / QK8_0);
    for (int b = 0; b < n / QK8_0; ++b) {
      const float d = fp16_to_fp32(blk[b].d);
      for (int i = 0; i < QK8_0; ++i) dst[b * QK8_0 + i] = d * static_cast<float>(blk[b].qs[i]);
    }
    return;
  }
  const int64_t offset = row * n;
  if (type == DType::F32) {
    const float* src = static_cast<const float*>(base) + offset;
    for (int i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  // F16C where the CPU has it (chosen at run time).
  dequantize_row(DType::F16, static_cast<const uint16_t*>(base) + offset, dst, n);
}

// Head row of KV head kvh at position p of a sequence: the cache slot from
// the block table, times the heads per slot.
inline int64_t kv_row(const PagedAttentionArgs& a, const int32_t* table, int32_t p, int32_t kvh) {
  const int64_t slot =
      static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
  return slot * a.n_kv_heads + kvh;
}

inline float dot(const float* a, const float* b, int n) {
  // Fixed summation order (8 lanes, then a fixed tree), independent of batching.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Positions are taken kChunk at a time (chunks start at multiples of kChunk,
// from the one that holds the token's first attended position, so a token's
// chunks never depend on the batch): the chunk's scores, then one
// online-softmax update per chunk: m' = max(m, chunk max), acc and l rescaled
// by exp(m - m'), and the chunk's exp(s - m') weights folded in position by
// position.
constexpr int kChunk = cpu::detail::kAttnChunk;
constexpr int kPrefetchChunks = 2;  // how far ahead decode items hint K and V rows
using cpu::detail::slot_offsets;
using cpu::detail::window_slot_offsets;

// cap tanh(s / cap) per lane: tanh8 on each half, so a capped score has the
// AVX2 kernel's bits.
inline __m512 softcap16(__m512 s, float softcap) {
  const __m512 cap = _mm512_set1_ps(softcap);
  const __m512 x = _mm512_div_ps(s, cap);
  const __m256 lo = cpu::simd::tanh8(_mm512_castps512_ps256(x));
  const __m256 hi = cpu::simd::tanh8(_mm512_extractf32x8_ps(x, 1));
  return _mm512_mul_ps(cap, _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1));
}

// Sums of four vectors, per 128-bit lane: lane L of the result holds
// [sum of a's lane L, b's, c's, d's] (a fixed tree of adds).
inline __m512 lane_sums4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  return _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
}

// How the kernels below read a head row of their cache type: kRowBytes for
// head_dim d, and load16(row, v) = elements 16v .. 16v + 15 as floats (the
// values the scalar path's load_row gives).
template <int DV>
struct F16Rows {
  static constexpr int kRowBytes = 32 * DV;
  static inline __m512 load16(const uint8_t* row, int v) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * v)));
  }
};
// q8_0: a row is DV / 2 blocks {f16 d; int8 qs[32]}, element = d * qs.
template <int DV>
struct Q8Rows {
  static constexpr int kRowBytes = DV / 2 * static_cast<int>(sizeof(BlockQ8_0));
  static inline __m512 load16(const uint8_t* row, int v) {
    const uint8_t* blk = row + sizeof(BlockQ8_0) * (v / 2);
    uint16_t h;
    std::memcpy(&h, blk, 2);
    const __m512i q = _mm512_cvtepi8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + 16 * (v % 2))));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q),
                         _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h))));
  }
};

// One chunk of cn positions (cn <= kChunk; slot_off: each position's slot
// offset in bytes; those before lo fall before the sliding window: computed,
// then masked) for ng <= SG query heads sharing the KV head whose rows start
// at kh / vh within a slot: scores (soft-capped with a.softcap > 0), the
// online-softmax update of (acc, m, l), and the weighted V rows.
template <class R, int DV, int SG>
inline __attribute__((always_inline)) void chunk_step(const PagedAttentionArgs& a,
                                                      const uint8_t* kh, const uint8_t* vh,
                                                      const int64_t* slot_off, int lo, int cn,
                                                      const float* q0, int ng,
                                                      __m512 (&acc)[SG][DV], float (&m)[SG],
                                                      float (&l)[SG]) {
  static_assert(SG <= 4, "the score tree takes four heads at a time");
  constexpr int d = 16 * DV;
  // Scores, position-major (four heads per position), from one tree of adds
  // over the heads' lane vectors (no horizontal sum per score).
  alignas(64) float pw[SG][kChunk];
  const __m512 scale = _mm512_set1_ps(a.scale);
  __m512 z[4];  // z[i]: the scores of positions 4i .. 4i + 3, four heads each
  for (int i = 0; i < 4; ++i) {
    __m512 u[4];
    for (int jj = 0; jj < 4; ++jj) {
      const int j = 4 * i + jj;
      if (j >= cn) {
        u[jj] = _mm512_setzero_ps();  // masked below
        continue;
      }
      const uint8_t* kr = kh + slot_off[j];
      __m512 k[DV];
      for (int v = 0; v < DV; ++v) k[v] = R::load16(kr, v);
      __m512 part[4];
      for (int g = 0; g < 4; ++g) {
        part[g] = _mm512_setzero_ps();
        if (g >= SG || g >= ng) continue;
        for (int v = 0; v < DV; ++v)
          part[g] = _mm512_fmadd_ps(_mm512_loadu_ps(q0 + g * d + 16 * v), k[v], part[g]);
      }
      u[jj] = lane_sums4(part[0], part[1], part[2], part[3]);
    }
    // Each position's four 128-bit lanes summed as (L0 + L2) + (L1 + L3), for
    // the four positions at once.
    const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 r = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
    z[i] = _mm512_mul_ps(r, scale);
    if (a.softcap > 0) z[i] = softcap16(z[i], a.softcap);
  }
  const __m512 z0 = z[0], z1 = z[1], z2 = z[2], z3 = z[3];
  const __mmask16 valid = static_cast<__mmask16>(((1u << cn) - 1) & ~((1u << lo) - 1));
  for (int g = 0; g < ng; ++g) {
    // Head g's column: elements g, g + 4, ... of (z0, z1) and of (z2, z3).
    const __m512i idx = _mm512_add_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28),
        _mm512_set1_epi32(g));
    const __m512 lo = _mm512_permutex2var_ps(z0, idx, z1);
    const __m512 hi = _mm512_permutex2var_ps(z2, idx, z3);
    const __m512 s16 = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid,
                                          _mm512_shuffle_f32x4(lo, hi, _MM_SHUFFLE(1, 0, 1, 0)));
    const float cmax = _mm512_reduce_max_ps(s16);
    if (cmax > m[g]) {
      const float corr = std::exp(m[g] - cmax);  // 0 on the first chunk
      l[g] *= corr;
      const __m512 c = _mm512_set1_ps(corr);
      for (int v = 0; v < DV; ++v) acc[g][v] = _mm512_mul_ps(acc[g][v], c);
      m[g] = cmax;
    }
    const __m512 p = cpu::simd::exp16(_mm512_sub_ps(s16, _mm512_set1_ps(m[g])));
    _mm512_store_ps(pw[g], p);
    l[g] += _mm512_reduce_add_ps(p);  // 0 past cn: exp(-inf) = 0
  }
  for (int j = lo; j < cn; ++j) {
    const uint8_t* vr = vh + slot_off[j];
    for (int v = 0; v < DV; ++v) {
      const __m512 vv = R::load16(vr, v);
      for (int g = 0; g < SG; ++g)
        if (g < ng) acc[g][v] = _mm512_fmadd_ps(_mm512_set1_ps(pw[g][j]), vv, acc[g][v]);
    }
  }
}

// chunk_step for ng heads whose state (acc: ng * 16 * DV floats, m, l) waits
// in memory between chunks.
template <class R, int DV, int SG>
inline __attribute__((always_inline)) void resume_chunk(const PagedAttentionArgs& a,
                                                        const uint8_t* kh, const uint8_t* vh,
                                                        const int64_t* slot_off, int lo, int cn,
                                                        const float* q0, int ng, float* st_acc,
                                                        float* st_m, float* st_l) {
  __m512 acc[SG][DV];
  float m[SG], l[SG];
  for (int g = 0; g < SG; ++g) {
    const bool live = g < ng;
    m[g] = live ? st_m[g] : -INFINITY;
    l[g] = live ? st_l[g] : 0.0f;
    for (int v = 0; v < DV; ++v)
      acc[g][v] = live ? _mm512_loadu_ps(st_acc + (g * DV + v) * 16) : _mm512_setzero_ps();
  }
  chunk_step<R, DV, SG>(a, kh, vh, slot_off, lo, cn, q0, ng, acc, m, l);
  for (int g = 0; g < ng; ++g) {
    st_m[g] = m[g];
    st_l[g] = l[g];
    for (int v = 0; v < DV; ++v) _mm512_storeu_ps(st_acc + (g * DV + v) * 16, acc[g][v]);
  }
}

// Token t's query heads on KV head kvh, all positions, the state of SG of them
// at a time in registers throughout.
template <class R, int DV, int SG>
inline __attribute__((always_inline)) void one_head(const PagedAttentionArgs& a, int32_t t,
                                                    int32_t kvh) {
  constexpr int d = 16 * DV;
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t row = static_cast<int64_t>(kvh) * R::kRowBytes;
  const auto* kh = static_cast<const uint8_t*>(a.k_cache) + row;
  const auto* vh = static_cast<const uint8_t*>(a.v_cache) + row;
  const int32_t* table = a.block_tables[a.token_seq[t]];
  const int32_t n_ctx = a.token_pos[t] + 1;
  const int32_t first = attention_first_pos(a, t);
  for (int g0 = 0; g0 < group; g0 += SG) {
    const int ng = std::min(SG, group - g0);
    const float* q0 = a.q + t * a.q_stride + (static_cast<int64_t>(kvh) * group + g0) * d;
    __m512 acc[SG][DV];
    float m[SG], l[SG];
    for (int g = 0; g < SG; ++g) {
      m[g] = -INFINITY;
      l[g] = 0.0f;
      for (int v = 0; v < DV; ++v) acc[g][v] = _mm512_setzero_ps();
    }
    for (int32_t p0 = first / kChunk * kChunk; p0 < n_ctx; p0 += kChunk) {
      const int cn = std::min<int32_t>(kChunk, n_ctx - p0);
      const int lo = std::max<int32_t>(0, first - p0);
      int64_t slot_off[kChunk];
      window_slot_offsets(a, table, p0, lo, cn, R::kRowBytes, slot_off);
      if (ng == SG)  // as a constant: the loops unroll without tests
        chunk_step<R, DV, SG>(a, kh, vh, slot_off, lo, cn, q0, SG, acc, m, l);
      else
        chunk_step<R, DV, SG>(a, kh, vh, slot_off, lo, cn, q0, ng, acc, m, l);
    }
    for (int g = 0; g < ng; ++g) {
      float* o = a.out + t * a.out_stride + (static_cast<int64_t>(kvh) * group + g0 + g) * d;
      const __m512 inv = _mm512_set1_ps(cpu::detail::softmax_inverse(
          a, static_cast<int64_t>(kvh) * group + g0 + g, m[g], l[g]));
      for (int v = 0; v < DV; ++v) _mm512_storeu_ps(o + 16 * v, _mm512_mul_ps(acc[g][v], inv));
    }
  }
}

// one_head as a call of its own: inlined into attention_rows's larger loop it
// ran ~25% slower (registers).
template <class R, int DV, int SG>
__attribute__((noinline)) void one_head_apart(const PagedAttentionArgs& a, int32_t t, int32_t kvh) {
  one_head<R, DV, SG>(a, t, kvh);
}

// The chunked online softmax for f16 and q8_0 caches with head_dim = 16 * DV
// (scores and sums added in the fixed order of chunk_step): K and V rows are
// widened straight from the cache (no f32 copies), and the accumulators of SG
// query heads stay in registers for a chunk (a GQA group larger than SG is
// done SG heads at a time); every head goes through chunk_step, so its
// arithmetic is one and the same whatever the work item.
//
// A prompt's token (its sequence has other tokens in the batch) is one item
// per KV head (one_head): the rows are shared and stay in cache. A token alone
// (decode) is one item per run of adjacent KV heads, walked chunk by chunk
// with the heads inside, so that each position's rows of those heads
// (adjacent in the slot) are read as one run rather than one head row per
// n_kv_heads * head_dim bytes, which streams from memory at a fraction of the
// speed (decode from DRAM, 16 sequences at 2048 positions: 5.5 -> 8 GB/s); the
// heads' softmax state waits in small per-thread arrays between chunks, and
// their rows are hinted two chunks ahead.
template <class R, int DV, int SG>
void attention_rows(const PagedAttentionArgs& a, ThreadPool& pool) {
  constexpr int d = 16 * DV;
  const int group = a.n_heads / a.n_kv_heads;
  // Items: a token's KV heads in runs of `per_item` for tokens alone in the
  // batch (decode: each reads its own cache from memory, so its rows should
  // come in long runs; runs as long as still leave each thread two items),
  // one head per item for the tokens of a prompt (their rows are shared and
  // stay in cache).
  const auto alone = [&](int32_t t) {
    return (t == 0 || a.token_seq[t - 1] != a.token_seq[t]) &&
           (t + 1 == a.n_tokens || a.token_seq[t + 1] != a.token_seq[t]);
  };
  int64_t n_alone = 0;
  for (int32_t t = 0; t < a.n_tokens; ++t) n_alone += alone(t);
  int per_item = a.n_kv_heads;
  while (per_item > 1 && n_alone * (a.n_kv_heads / per_item) < 2 * int64_t{pool.size()})
    per_item /= 2;
  while (a.n_kv_heads % per_item != 0) --per_item;
  struct Item {
    int32_t t, h0, heads;
    bool from_memory;  // a token alone: hint its rows ahead
  };
  std::vector<Item> items;
  items.reserve(static_cast<size_t>(a.n_tokens) * a.n_kv_heads);
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    const bool solo = alone(t);
    const int step = solo ? per_item : 1;
    for (int32_t h = 0; h < a.n_kv_heads; h += step) items.push_back({t, h, step, solo});
  }
  const int64_t work = static_cast<int64_t>(items.size());
  constexpr int rb = R::kRowBytes;
  const auto* kc = static_cast<const uint8_t*>(a.k_cache);
  const auto* vc = static_cast<const uint8_t*>(a.v_cache);
  pool.parallel_for(work, [&](int64_t begin, int64_t end, int) {
    const size_t max_q = static_cast<size_t>(per_item) * group;  // query heads of an item
    std::vector<float> st_acc(max_q * d);
    std::vector<float> st_m(max_q), st_l(max_q);
    for (int64_t w = begin; w < end; ++w) {
      const int32_t t = items[static_cast<size_t>(w)].t;
      const int32_t h0 = items[static_cast<size_t>(w)].h0;
      const int heads = items[static_cast<size_t>(w)].heads;
      const bool hint = items[static_cast<size_t>(w)].from_memory;
      const size_t n_q = static_cast<size_t>(heads) * group;
      const int32_t* table = a.block_tables[a.token_seq[t]];
      const int32_t n_ctx = a.token_pos[t] + 1;
      const int32_t first = attention_first_pos(a, t);
      if (heads == 1 && !hint) {  // a prompt's token
        one_head_apart<R, DV, SG>(a, t, h0);
        continue;
      }
      std::fill(st_acc.begin(), st_acc.begin() + static_cast<ptrdiff_t>(n_q * d), 0.0f);
      std::fill(st_m.begin(), st_m.begin() + static_cast<ptrdiff_t>(n_q), -INFINITY);
      std::fill(st_l.begin(), st_l.begin() + static_cast<ptrdiff_t>(n_q), 0.0f);
      for (int32_t p0 = first / kChunk * kChunk; p0 < n_ctx; p0 += kChunk) {
        const int cn = std::min<int32_t>(kChunk, n_ctx - p0);
        const int lo = std::max<int32_t>(0, first - p0);
        int64_t slot_off[kChunk];  // byte offset of each position's slot
        window_slot_offsets(a, table, p0, lo, cn, rb, slot_off);
        // The rows kPrefetchChunks chunks ahead, hinted head by head between
        // the heads' work (all at once, the hints stall on the misses in flight).
        int64_t pf_off[kChunk];
        int pn = 0;
        if (hint) {
          const int32_t pf0 = p0 + kPrefetchChunks * kChunk;
          pn = std::max(0, std::min<int32_t>(kChunk, n_ctx - pf0));
          if (pn > 0) slot_offsets(a, table, pf0, pn, rb, pf_off);
        }
        for (int hh = 0; hh < heads; ++hh) {
          const int32_t kvh = h0 + hh;
          for (int j = 0; j < pn; ++j) {
            const int64_t o = pf_off[j] + static_cast<int64_t>(kvh) * rb;
            for (int b = 0; b < rb; b += 64) {
              cpu::simd::prefetch(kc + o + b);
              cpu::simd::prefetch(vc + o + b);
            }
            if constexpr (rb % 64 != 0) {  // a row that ends in one more line
              cpu::simd::prefetch(kc + o + rb - 1);
              cpu::simd::prefetch(vc + o + rb - 1);
            }
          }
          for (int g0 = 0; g0 < group; g0 += SG) {
            const int ng = std::min(SG, group - g0);
            const size_t si = static_cast<size_t>(hh) * group + g0;  // state index
            const float* q0 = a.q + t * a.q_stride + (static_cast<int64_t>(kvh) * group + g0) * d;
            const uint8_t *kh = kc + kvh * rb, *vh = vc + kvh * rb;
            // A full set of heads as a constant: its loops unroll without tests.
            if (ng == SG)
              resume_chunk<R, DV, SG>(a, kh, vh, slot_off, lo, cn, q0, SG, &st_acc[si * d],
                                      &st_m[si], &st_l[si]);
            else
              resume_chunk<R, DV, SG>(a, kh, vh, slot_off, lo, cn, q0, ng, &st_acc[si * d],
                                      &st_m[si], &st_l[si]);
          }
        }
      }
      for (size_t qh = 0; qh < n_q; ++qh) {
        float* o = a.out + t * a.out_stride + (static_cast<int64_t>(h0) * group + qh) * d;
        const __m512 inv = _mm512_set1_ps(cpu::detail::softmax_inverse(
            a, static_cast<int64_t>(h0) * group + static_cast<int64_t>(qh), st_m[qh], st_l[qh]));
        for (int v = 0; v < DV; ++v)
          _mm512_storeu_ps(o + 16 * v,
                           _mm512_mul_ps(_mm512_loadu_ps(&st_acc[(qh * DV + v) * 16]), inv));
      }
    }
  });
}

PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

}  // namespace

void paged_attention(const PagedAttentionArgs& a, ThreadPool& pool) {
  paged_attention(a, pool, cpu::best_isa());
}

void paged_attention(const PagedAttentionArgs& a, ThreadPool& pool, cpu::CpuIsa isa) {
  if (!cpu::isa_available(isa))
    throw Error(std::string("paged_attention: the ") + cpu::isa_name(isa) +
                " variant is not available on this CPU");
  // Sliding windows and soft caps run in every kernel; a latent cache (v_dim)
  // in its own or the scalar one.
  const bool plain = a.v_dim <= 0;
  // MLA's latent cache: its own vector kernel (paged_attention_latent.cpp).
  if (a.v_dim > 0 && a.window <= 0 && a.softcap <= 0 && isa != cpu::CpuIsa::Scalar)
    return cpu::detail::latent_attention(a, pool, isa);
#if PAGELLM_HAVE_AVX512
  if (isa == cpu::CpuIsa::Avx512 && plain) {
    if (a.kv_type == DType::F16 && a.head_dim == 64)
      return attention_rows<F16Rows<4>, 4, 4>(a, pool);
    if (a.kv_type == DType::F16 && a.head_dim == 128)
      return attention_rows<F16Rows<8>, 8, 2>(a, pool);
    if (a.kv_type == DType::Q8_0 && a.head_dim == 64)
      return attention_rows<Q8Rows<4>, 4, 4>(a, pool);
    if (a.kv_type == DType::Q8_0 && a.head_dim == 128)
      return attention_rows<Q8Rows<8>, 8, 2>(a, pool);
    // Other caches (f32) and head sizes: the AVX2 kernel.
  }
#endif
#if PAGELLM_HAVE_AVX2
  if (isa >= cpu::CpuIsa::Avx2 && a.head_dim % 8 == 0 && plain)
    return cpu::detail::attention_avx2(a, pool);
#endif
  const int group = a.n_heads / a.n_kv_heads;
  const int d = a.head_dim;
  // A latent cache (MLA): values are the K rows' first v_dim elements, and its
  // one KV head serves every query head, so items take runs of `per` query
  // heads (a decode token still spreads over the threads).
  const bool latent = a.v_dim > 0;
  const int dv = latent ? a.v_dim : d;
  const int per = latent ? std::min(group, 4) : group;
  const int splits = (group + per - 1) / per;
  const int64_t work = static_cast<int64_t>(a.n_tokens) * a.n_kv_heads * splits;

  pool.parallel_for(work, [&](int64_t begin, int64_t end, int) {
    std::vector<float> kbuf(static_cast<size_t>(d)), vbuf(static_cast<size_t>(d));
    std::vector<float> acc(static_cast<size_t>(per) * dv), m(per), l(per);
    for (int64_t w = begin; w < end; ++w) {
      const auto [t, kvh, table, n_ctx, q0] = cpu::detail::head_item(a, w / splits);
      const int g0 = static_cast<int>(w % splits) * per, ng = std::min(per, group - g0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(m.begin(), m.end(), -INFINITY);
      std::fill(l.begin(), l.end(), 0.0f);
      const float* vrow = latent ? kbuf.data() : vbuf.data();
      for (int32_t p = attention_first_pos(a, t); p < n_ctx; ++p) {
        const int64_t row = kv_row(a, table, p, kvh);
        load_row(a.k_cache, a.kv_type, row, d, kbuf.data());
        if (!latent) load_row(a.v_cache, a.kv_type, row, d, vbuf.data());
        for (int j = 0; j < ng; ++j) {
          float s = dot(q0 + (g0 + j) * d, kbuf.data(), d) * a.scale;
          if (a.softcap > 0) s = a.softcap * std::tanh(s / a.softcap);
          float* accg = acc.data() + j * dv;
          if (s > m[j]) {
            const float corr = std::exp(m[j] - s);  // exp(-inf) = 0 on the first position
            l[j] *= corr;
            for (int i = 0; i < dv; ++i) accg[i] *= corr;
            m[j] = s;
          }
          const float pexp = std::exp(s - m[j]);
          l[j] += pexp;
          for (int i = 0; i < dv; ++i) accg[i] += pexp * vrow[i];
        }
      }
      for (int j = 0; j < ng; ++j) {
        float* o = a.out + t * a.out_stride + (static_cast<int64_t>(kvh) * group + g0 + j) * dv;
        const float inv = cpu::detail::softmax_inverse(
            a, static_cast<int64_t>(kvh) * group + g0 + j, m[j], l[j]);
        for (int i = 0; i < dv; ++i) o[i] = acc[static_cast<size_t>(j * dv + i)] * inv;
      }
    }
  });
}

}  // namespace pagellm
