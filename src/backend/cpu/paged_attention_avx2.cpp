// The AVX2 paged-attention kernel (paged_attention_kernels.h): CPUs without
// AVX-512 (most client x86-64 parts) and caches or head sizes the AVX-512
// kernels do not specialise.
//
// A token's context is cut into segments of kSegment positions from position
// 0 (with a sliding window, those before the window are left out and the
// positions before it masked, chunk by chunk); a work item is one (tile, KV head) over the tile's
// segments, or for a tile of one token (decode) in a batch of few, one (token, segment, KV head) (a
// tile: up to kTileTokens consecutive prompt tokens of one sequence). Per item and chunk of
// kAttnChunk positions, for the query rows (tile token, query head of the GQA group) that reach the
// chunk, four rows at a time, reading K and V straight from the cache (f16 / q8_0 converted in
// registers):
//   u_j = sum over v of q[8v..8v+7] * k_j[8v..8v+7] (lane vectors, v in order)
//   s_j = lane sum of u_j by one fixed tree (eight positions per tree) * scale
//         (soft cap: cap * tanh8(s_j / cap)), -inf outside the token's window
//   m' = max(m, max_j s_j); acc, l scaled by exp(m - m') when m' > m
//   p_j = exp8(s_j - m'); l += (p_0..7 + p_8..15) summed by hsum
//   acc += p_j * v_j, position by position
// Each segment starts from a fresh state; a token's output is acc / l of the
// fold of its segments' states in order (fold_state).
// Every token takes the same steps whatever the batch and the threads, so the
// output is batch-invariant; the values differ from the other variants in
// rounding only.
#include "backend/cpu/paged_attention_kernels.h"

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace pagellm::cpu::detail {

namespace {
// At most this many floats of split tokens' segment states (16 MiB, kept by
// the calling thread); past it a token folds its segments in one unit per KV
// head (the same bits, but no split over more threads than KV heads: a 32-head
// model of head size 128 gets there past 64k positions of one decode token).
constexpr size_t kMaxPartFloats = size_t{4} << 20;
std::atomic<size_t> g_max_part_floats{0};  // 0: kMaxPartFloats
}  // namespace

void set_avx2_max_part_floats(size_t floats) {
  g_max_part_floats.store(floats, std::memory_order_relaxed);
}

size_t avx2_max_part_floats() {
  const size_t set = g_max_part_floats.load(std::memory_order_relaxed);
  return set ? set : kMaxPartFloats;
}

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2

namespace {

constexpr int kChunk = kAttnChunk;
// Prompt tokens per tile: their query rows share each chunk's K and V reads.
constexpr int kTileTokens = 4;
// Positions per segment: a token reduces each segment of its context from a
// fresh softmax state and folds the segments' states in order (fold_state).
// Fixed, so part of the numerics. A decode token's segments can then go to
// different threads, each reading whole slots (all KV heads) in address
// order, where splitting the heads left each thread half of every slot (Zen 3,
// 2 threads: 8 GB/s read against 18 for whole slots). A fold costs 2 * d
// operations per query head, against 256 * d for a segment's positions.
constexpr int kSegment = 64;

// Lane j of the result: the sum of u[j]'s eight lanes, as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
inline __m256 lane_sums8(const __m256* u) {
  const __m256 q0123 = _mm256_hadd_ps(_mm256_hadd_ps(u[0], u[1]), _mm256_hadd_ps(u[2], u[3]));
  const __m256 q4567 = _mm256_hadd_ps(_mm256_hadd_ps(u[4], u[5]), _mm256_hadd_ps(u[6], u[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0123, q4567, 0x20),
                       _mm256_permute2f128_ps(q0123, q4567, 0x31));
}

// Head rows of the cache, read eight elements at a time as f32 straight from
// the row (no widened copy: converting in registers costs one operation per
// R multiply-adds, where a copy costs a store and a load more).
struct F16Rows {
  static __m256 load8(const char* row, int v) {
    return _mm256_cvtph_ps(simd::load128(row + 16 * v));
  }
};
struct F32Rows {
  static __m256 load8(const char* row, int v) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + 8 * v);
  }
};
struct Q8Rows {  // q * d, per QK8_0 = 32 elements (four vectors) of a block
  static __m256 load8(const char* row, int v) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(row) + v / 4;
    const __m256i q = _mm256_cvtepi8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + 8 * (v % 4))));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), simd::bcast_f16(&b->d));
  }
};

// One query row's online-softmax state (acc: head_dim floats) and which of
// the chunk's positions it attends to: [cs, ci) (cs > 0: the first ones fall
// before its sliding window; cs < ci).
struct RowState {
  const float* q;
  float* acc;
  float* m;
  float* l;
  int ci;
  int cs;
};

// u[r][j] for positions j < nj (a multiple of 8): the lane vector
// sum over v of q_r[8v..8v+7] * k_j[8v..8v+7], v in order. R rows share each
// converted K vector; NP positions per pass keep R * NP <= 8 accumulators.
template <class Rows, int R>
inline void lane_scores(const RowState* rs, const char* const* krow, int nj, int dv,
                        __m256 (*u)[kChunk]) {
  constexpr int NP = R == 1 ? 8 : R == 2 ? 4 : 2;
  for (int j0 = 0; j0 < nj; j0 += NP) {
    __m256 s[R][NP];
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < NP; ++p) s[r][p] = _mm256_setzero_ps();
    for (int v = 0; v < dv; ++v) {
      __m256 k[NP];
      for (int p = 0; p < NP; ++p) k[p] = Rows::load8(krow[j0 + p], v);
      for (int r = 0; r < R; ++r) {
        const __m256 qv = _mm256_loadu_ps(rs[r].q + 8 * v);
        for (int p = 0; p < NP; ++p) s[r][p] = _mm256_fmadd_ps(qv, k[p], s[r][p]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < NP; ++p) u[r][j0 + p] = s[r][p];
  }
}

// acc_r[8 v0 .. 8 (v0 + NV)) += p_rj * v_j[...] for j < cn, in position order;
// each converted V vector serves the R rows.
template <class Rows, int R, int NV>
inline void weigh_slice(const RowState* rs, const char* const* vrow, const float (*pw)[kChunk],
                        int v0, int cn) {
  __m256 o[R][NV];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NV; ++i) o[r][i] = _mm256_loadu_ps(rs[r].acc + 8 * (v0 + i));
  for (int j = 0; j < cn; ++j) {
    __m256 x[NV];
    for (int i = 0; i < NV; ++i) x[i] = Rows::load8(vrow[j], v0 + i);
    for (int r = 0; r < R; ++r) {
      const __m256 p = _mm256_broadcast_ss(&pw[r][j]);
      for (int i = 0; i < NV; ++i) o[r][i] = _mm256_fmadd_ps(p, x[i], o[r][i]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(rs[r].acc + 8 * (v0 + i), o[r][i]);
}

inline void scale_row(float* x, int d, float c) {
  const __m256 cv = _mm256_set1_ps(c);
  for (int i = 0; i < d; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), cv));
}

// Scores of positions [j0, j0 + 8) scaled (and soft-capped: cap tanh(s / cap)
// with softcap > 0), -inf at positions outside [cs, ci).
inline __m256 masked_scores8(const __m256* u, float scale, float softcap, int j0, int cs, int ci) {
  __m256 s = _mm256_mul_ps(lane_sums8(u), _mm256_set1_ps(scale));
  if (softcap > 0) {
    const __m256 cap = _mm256_set1_ps(softcap);
    s = _mm256_mul_ps(cap, simd::tanh8(_mm256_div_ps(s, cap)));
  }
  const __m256i idx =
      _mm256_add_epi32(_mm256_set1_epi32(j0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(cs), idx),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(ci), idx));
  return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), s, _mm256_castsi256_ps(in));
}

// One chunk for R query rows that read the same KV head: krow / vrow hold
// kChunk row pointers (past the chunk's cn positions, copies of a valid
// row: computed, then masked). Per row, the steps it takes alone: a row
// with ci < cn weighs its positions past ci by exp(-inf) = 0, adding 0.
template <class Rows, int R>
void chunk_rows(const RowState* rs, const char* const* krow, const char* const* vrow, int d, int cn,
                float scale, float softcap) {
  const int dv = d / 8;
  __m256 u[R][kChunk];
  lane_scores<Rows, R>(rs, krow, cn > 8 ? kChunk : 8, dv, u);
  alignas(32) float pw[R][kChunk];
  for (int r = 0; r < R; ++r) {
    const RowState& st = rs[r];
    const __m256 s_lo = st.cs < 8 ? masked_scores8(u[r], scale, softcap, 0, st.cs, st.ci)
                                  : _mm256_set1_ps(-INFINITY);
    const __m256 s_hi = st.ci > 8 ? masked_scores8(u[r] + 8, scale, softcap, 8, st.cs, st.ci)
                                  : _mm256_set1_ps(-INFINITY);
    const float cmax = simd::hmax(_mm256_max_ps(s_lo, s_hi));
    if (cmax > *st.m) {
      const float corr = std::exp(*st.m - cmax);  // 0 on the first chunk
      *st.l *= corr;
      scale_row(st.acc, d, corr);
      *st.m = cmax;
    }
    const __m256 mv = _mm256_set1_ps(*st.m);
    const __m256 p_lo = simd::exp8(_mm256_sub_ps(s_lo, mv));
    const __m256 p_hi = simd::exp8(_mm256_sub_ps(s_hi, mv));  // 0 past ci
    _mm256_store_ps(pw[r], p_lo);
    _mm256_store_ps(pw[r] + 8, p_hi);
    *st.l += simd::hsum(_mm256_add_ps(p_lo, p_hi));
  }
  constexpr int NV = R == 1 ? 8 : R == 2 ? 4 : 2;
  int v = 0;
  for (; v + NV <= dv; v += NV) weigh_slice<Rows, R, NV>(rs, vrow, pw, v, cn);
  for (; v < dv; ++v) weigh_slice<Rows, R, 1>(rs, vrow, pw, v, cn);
}

// Rows in blocks of up to four (the chunk's K and V rows are read once per block).
template <class Rows>
void chunk_all(const RowState* rs, int n, const char* const* krow, const char* const* vrow, int d,
               float scale, float softcap) {
  for (int b = 0; b < n; b += 4) {
    const RowState* blk = rs + b;
    int cn = 0;
    for (int r = 0; r < std::min(4, n - b); ++r) cn = std::max(cn, blk[r].ci);
    switch (std::min(4, n - b)) {
      case 1:
        chunk_rows<Rows, 1>(blk, krow, vrow, d, cn, scale, softcap);
        break;
      case 2:
        chunk_rows<Rows, 2>(blk, krow, vrow, d, cn, scale, softcap);
        break;
      case 3:
        chunk_rows<Rows, 3>(blk, krow, vrow, d, cn, scale, softcap);
        break;
      default:
        chunk_rows<Rows, 4>(blk, krow, vrow, d, cn, scale, softcap);
        break;
    }
  }
}

using ChunkFn = void (*)(const RowState*, int, const char* const*, const char* const*, int, float,
                         float);

// Loads one byte of each line of [p, p + n) (n > 0): pulls rows into the
// cache ahead of the chunk that reads them. Loads, not prefetch hints: on Zen 3
// (KVM) hints for a scattered block left the read at 4 GB/s, loads at 15.
inline void touch_lines(const char* p, size_t n) {
  for (size_t b = 0; b < n; b += 64) (void)*static_cast<const volatile char*>(p + b);
  (void)*static_cast<const volatile char*>(p + n - 1);
}

// (acc, m, l) <- the softmax state of its positions followed by those of
// (acc_b, m_b, l_b) (m_b finite). From the empty state (m = -inf, l = 0,
// acc = 0) it yields b's state exactly (up to the sign of a zero), so a
// token's result is the fold of its segments in order, however they were
// computed.
inline void fold_state(float* acc, float& m, float& l, const float* acc_b, float m_b, float l_b,
                       int d) {
  const float mx = std::max(m, m_b);
  const float ca = std::exp(m - mx), cb = std::exp(m_b - mx);
  l = std::fma(l_b, cb, l * ca);
  m = mx;
  const __m256 va = _mm256_set1_ps(ca), vb = _mm256_set1_ps(cb);
  for (int k = 0; k < d; k += 8)
    _mm256_storeu_ps(acc + k, _mm256_fmadd_ps(_mm256_loadu_ps(acc_b + k), vb,
                                              _mm256_mul_ps(_mm256_loadu_ps(acc + k), va)));
}

// One segment's softmax states of a split token, every query head:
// acc [n_heads][d], then m [n_heads], then l [n_heads].
struct SegStates {
  float* base;
  int64_t n_heads, d;
  static int64_t floats(int64_t n_heads, int64_t d) { return n_heads * (d + 2); }
  float* acc(int64_t qh) const { return base + qh * d; }
  float& m(int64_t qh) const { return base[n_heads * d + qh]; }
  float& l(int64_t qh) const { return base[n_heads * (d + 1) + qh]; }
};

// Query head qh's output row from its state (acc, m, l).
inline void write_out(const PagedAttentionArgs& a, float* o, int64_t qh, const float* acc, float m,
                      float l, int d) {
  const __m256 inv = _mm256_set1_ps(softmax_inverse(a, qh, m, l));
  for (int k = 0; k < d; k += 8)
    _mm256_storeu_ps(o + k, _mm256_mul_ps(_mm256_loadu_ps(acc + k), inv));
}

}  // namespace

void attention_avx2(const PagedAttentionArgs& a, ThreadPool& pool) {
  const int group = a.n_heads / a.n_kv_heads;
  const int d = a.head_dim;
  const size_t row_bytes = dtype_row_bytes(a.kv_type, d);
  const auto* kb = static_cast<const char*>(a.k_cache);
  const auto* vb = static_cast<const char*>(a.v_cache);
  const size_t gd = static_cast<size_t>(group) * d;
  const ChunkFn chunk = a.kv_type == DType::F16    ? chunk_all<F16Rows>
                        : a.kv_type == DType::Q8_0 ? chunk_all<Q8Rows>
                                                   : chunk_all<F32Rows>;
  auto n_segments = [](int32_t n_ctx) { return (n_ctx + kSegment - 1) / kSegment; };

  // Tiles: runs of up to kTileTokens consecutive tokens of one sequence (a
  // prompt's), whose query rows share each chunk's K and V reads.
  std::vector<int32_t> tiles;  // first token of each tile, then n_tokens
  for (int32_t t = 0; t < a.n_tokens;) {
    tiles.push_back(t);
    const int32_t seq = a.token_seq[t];
    for (++t; t < a.n_tokens && t - tiles.back() < kTileTokens && a.token_seq[t] == seq;) ++t;
  }
  tiles.push_back(a.n_tokens);
  const auto n_tiles = static_cast<int32_t>(tiles.size() - 1);
  // Units of work, each times the KV heads: a tile's segments [s0, s1) (from
  // the one that holds the tile's first attended position: a sliding window
  // leaves the earlier ones out). A
  // tile goes through its segments in one unit, folding as it goes, except a
  // tile of one token (decode) in a batch of few tiles, with several threads:
  // each of its segments is a unit of its own (kept in `parts`, folded
  // after), so that threads split its context along positions, each reading
  // whole slots in address order.
  struct Unit {
    int32_t tile, s0, s1;
  };
  const bool split = pool.size() > 1 && n_tiles < 4 * pool.size();
  std::vector<Unit> units;
  const auto seg_floats = static_cast<size_t>(SegStates::floats(a.n_heads, d));
  const size_t part_limit = avx2_max_part_floats();
  // A split token's segment s >= its first s_lo is part part_base + s - s_lo.
  std::vector<int64_t> part_base(static_cast<size_t>(a.n_tokens), -1);
  std::vector<int32_t> split_tokens;
  int64_t n_parts = 0;
  for (int32_t tile = 0; tile < n_tiles; ++tile) {
    const int32_t t0 = tiles[tile];
    int32_t max_ctx = 0, min_first = a.token_pos[t0];
    for (int32_t t = t0; t < tiles[tile + 1]; ++t) {
      max_ctx = std::max(max_ctx, a.token_pos[t] + 1);
      min_first = std::min(min_first, attention_first_pos(a, t));
    }
    const int ns = n_segments(max_ctx), s_lo = min_first / kSegment;
    if (split && ns - s_lo > 1 && tiles[tile + 1] == t0 + 1 &&
        static_cast<size_t>(n_parts + ns - s_lo) * seg_floats <= part_limit) {
      for (int32_t s = s_lo; s < ns; ++s) units.push_back({tile, s, s + 1});
      part_base[t0] = n_parts, n_parts += ns - s_lo, split_tokens.push_back(t0);
    } else {
      units.push_back({tile, s_lo, ns});
    }
  }
  thread_local std::vector<float> parts;  // kept: decode calls this per layer
  if (parts.size() < static_cast<size_t>(n_parts) * seg_floats)
    parts.resize(static_cast<size_t>(n_parts) * seg_floats);
  // The workers write through this pointer (`parts` named on a worker thread
  // would be that thread's own, empty vector).
  float* const part_data = parts.data();
  const int64_t work = static_cast<int64_t>(units.size()) * a.n_kv_heads;

  pool.parallel_for(work, [&](int64_t begin, int64_t end, int) {
    // State of (tile token i, head h of the run, query head g) at
    // ((i * nh + h) * group + g): the segment's (acc, m, l) and the fold so far.
    const size_t states = static_cast<size_t>(kTileTokens) * a.n_kv_heads * group;
    thread_local std::vector<float> buf;  // this thread's, kept between calls (decode: per layer)
    if (buf.size() < 2 * states * (d + 2)) buf.resize(2 * states * (d + 2));
    float* const acc = buf.data();
    float* const m = acc + states * d;
    float* const l = m + states;
    float* const f_acc = l + states;
    float* const f_m = f_acc + states * d;
    float* const f_l = f_m + states;
    thread_local std::vector<RowState> rs;
    rs.resize(static_cast<size_t>(kTileTokens) * group);
    // The items of one unit (its KV heads kvh0 .. kvh0 + nh - 1 here) go
    // through the positions together, chunk by chunk: a slot holds the rows
    // of every KV head side by side, and the run reads its nh rows of each
    // slot together. Each (token, query head) takes the steps it takes alone.
    for (int64_t w0 = begin; w0 < end;) {
      const Unit unit = units[w0 / a.n_kv_heads];
      const int kvh0 = static_cast<int>(w0 % a.n_kv_heads);
      const int nh = static_cast<int>(std::min<int64_t>(end - w0, a.n_kv_heads - kvh0));
      const int32_t t0 = tiles[unit.tile];
      const int nt = tiles[unit.tile + 1] - t0;
      const int32_t* table = a.block_tables[a.token_seq[t0]];
      int32_t n_ctx[kTileTokens], first_pos[kTileTokens];  // each token attends to [first, n_ctx)
      int32_t max_ctx = 0, min_first = a.token_pos[t0];
      for (int i = 0; i < nt; ++i) {
        max_ctx = std::max(max_ctx, n_ctx[i] = a.token_pos[t0 + i] + 1);
        min_first = std::min(min_first, first_pos[i] = attention_first_pos(a, t0 + i));
      }
      // Chunks stay at multiples of kChunk (a token's chunks never depend on
      // its tile); those before every token's window are left out.
      const int32_t chunk_lo = min_first / kChunk * kChunk;
      const size_t used = static_cast<size_t>(nt) * nh * group;
      std::fill(f_acc, f_acc + static_cast<int64_t>(used * d), 0.0f);
      std::fill(f_m, f_m + static_cast<int64_t>(used), -INFINITY);
      std::fill(f_l, f_l + static_cast<int64_t>(used), 0.0f);
      const size_t span = static_cast<size_t>(nh) * row_bytes;  // the run's bytes of a slot
      // fn(state index, query head) for tile token i's query rows in the run.
      const auto for_rows = [&](int i, const auto& fn) {
        for (int h = 0; h < nh; ++h)
          for (int g = 0; g < group; ++g)
            fn((static_cast<size_t>(i) * nh + h) * group + g,
               static_cast<int64_t>(kvh0 + h) * group + g);
      };
      const int32_t first = std::max(unit.s0 * kSegment, chunk_lo);
      for (int32_t sg = unit.s0; sg < unit.s1; ++sg) {
        const int32_t p_begin = sg * kSegment;
        const int32_t p_end = std::min(p_begin + kSegment, max_ctx);
        std::fill(acc, acc + static_cast<int64_t>(used * d), 0.0f);
        std::fill(m, m + static_cast<int64_t>(used), -INFINITY);
        std::fill(l, l + static_cast<int64_t>(used), 0.0f);
        for (int32_t p0 = std::max(p_begin, chunk_lo); p0 < p_end; p0 += kChunk) {
          const int cn = std::min<int32_t>(kChunk, p_end - p0);
          int64_t row[kChunk];  // head 0's row of each position's slot
          window_slot_offsets(a, table, p0, std::max(0, min_first - p0), cn, 1, row);
          // The next chunk's rows (and at a unit's start this one's), in
          // address order, before this chunk computes.
          for (int32_t pf0 = p0 == first ? p0 : p0 + kChunk; pf0 <= p0 + kChunk; pf0 += kChunk) {
            const int pn = std::max(0, std::min<int32_t>(kChunk, max_ctx - pf0));
            int64_t pf[kChunk];
            if (pn > 0) window_slot_offsets(a, table, pf0, std::max(0, min_first - pf0), pn, 1, pf);
            for (int j = 0; j < pn; ++j) {
              const size_t o = static_cast<size_t>(pf[j] + kvh0) * row_bytes;
              touch_lines(kb + o, span);
              touch_lines(vb + o, span);
            }
          }
          for (int h = 0; h < nh; ++h) {
            const char* krow[kChunk];
            const char* vrow[kChunk];
            for (int j = 0; j < kChunk; ++j) {
              const size_t o = static_cast<size_t>(row[std::min(j, cn - 1)] + kvh0 + h) * row_bytes;
              krow[j] = kb + o;
              vrow[j] = vb + o;
            }
            int n = 0;  // the query rows (tile token, group head) that reach this chunk
            for (int i = 0; i < nt; ++i) {
              if (p0 >= n_ctx[i] || p0 + kChunk <= first_pos[i]) continue;
              const int ci = std::min<int32_t>(kChunk, n_ctx[i] - p0);
              const int cs = std::max<int32_t>(0, first_pos[i] - p0);
              const float* q0 = a.q + (t0 + i) * a.q_stride + static_cast<size_t>(kvh0 + h) * gd;
              const size_t s0 = (static_cast<size_t>(i) * nh + h) * group;
              for (int g = 0; g < group; ++g)
                rs[n++] = {q0 + g * d, acc + (s0 + g) * d, &m[s0 + g], &l[s0 + g], ci, cs};
            }
            chunk(rs.data(), n, krow, vrow, d, a.scale, a.softcap);
          }
        }
        // The segment's state: kept (a unit of one segment of a split token)
        // or folded into the tile's.
        for (int i = 0; i < nt; ++i) {
          if (n_ctx[i] <= p_begin || first_pos[i] >= p_begin + kSegment) continue;
          const int64_t base = part_base[t0 + i];
          const SegStates part{
              base < 0 ? nullptr : part_data + (base + sg - min_first / kSegment) * seg_floats,
              a.n_heads, d};
          for_rows(i, [&](size_t si, int64_t qh) {
            if (part.base != nullptr) {
              std::memcpy(part.acc(qh), acc + si * d, sizeof(float) * d);
              part.m(qh) = m[si];
              part.l(qh) = l[si];
            } else {
              fold_state(f_acc + si * d, f_m[si], f_l[si], acc + si * d, m[si], l[si], d);
            }
          });
        }
      }
      for (int i = 0; i < nt; ++i) {
        if (part_base[t0 + i] >= 0) continue;
        for_rows(i, [&](size_t si, int64_t qh) {
          write_out(a, a.out + (t0 + i) * a.out_stride + qh * d, qh, f_acc + si * d, f_m[si],
                    f_l[si], d);
        });
      }
      w0 += nh;
    }
  });
  // The split tokens' segments, folded in order, here: fewer than 4 tokens per
  // thread, one fold (2 * head_dim operations) per segment and query head.
  std::vector<float> f(static_cast<size_t>(d));
  for (const int32_t t : split_tokens) {
    const int ns = n_segments(a.token_pos[t] + 1) - attention_first_pos(a, t) / kSegment;
    for (int32_t qh = 0; qh < a.n_heads; ++qh) {
      std::fill(f.begin(), f.end(), 0.0f);
      float fm = -INFINITY, fl = 0;
      for (int s = 0; s < ns; ++s) {
        const SegStates ps{part_data + (part_base[t] + s) * seg_floats, a.n_heads, d};
        fold_state(f.data(), fm, fl, ps.acc(qh), ps.m(qh), ps.l(qh), d);
      }
      write_out(a, a.out + t * a.out_stride + static_cast<int64_t>(qh) * d, qh, f.data(), fm, fl,
                d);
    }
  }
}

PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

}  // namespace pagellm::cpu::detail
