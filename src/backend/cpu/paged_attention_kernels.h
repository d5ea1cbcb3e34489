// Internal to backend/cpu: what the paged-attention kernels of the ISA
// variants share (paged_attention.cpp: scalar and AVX-512 kernels and the
// dispatch; paged_attention_avx2.cpp: the AVX2 kernel). Layouts:
// backend/attention_args.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/attention_args.h"
#include "util/thread_pool.h"

namespace pagellm::cpu::detail {

// The vector kernels take positions kAttnChunk at a time, in chunks that start
// at multiples of kAttnChunk (from the one holding the token's first attended
// position: a sliding window masks the chunk's positions before it), so a
// token's chunks never depend on the batch it is in.
constexpr int kAttnChunk = 16;

// Element offsets of the slots of positions p0 .. p0 + n - 1 (head 0's row;
// a slot holds n_kv_heads rows of d), walking the block table with one
// division for the run.
inline void slot_offsets(const PagedAttentionArgs& a, const int32_t* table, int32_t p0, int n,
                         int d, int64_t* off) {
  int32_t blk = p0 / a.block_size, in = p0 % a.block_size;
  const int64_t slot_elems = static_cast<int64_t>(a.n_kv_heads) * d;
  for (int j = 0; j < n; ++j) {
    off[j] = (static_cast<int64_t>(table[blk]) * a.block_size + in) * slot_elems;
    if (++in == a.block_size) in = 0, ++blk;
  }
}

// slot_offsets for a chunk whose first lo positions fall before the window:
// they take position p0 + lo's slot (computed, then masked), since a window
// group's table has no block (kNoBlock) where blocks left the window.
inline void window_slot_offsets(const PagedAttentionArgs& a, const int32_t* table, int32_t p0,
                                int lo, int n, int d, int64_t* off) {
  slot_offsets(a, table, p0 + lo, n - lo, d, off + lo);
  for (int j = 0; j < lo; ++j) off[j] = off[lo];
}

// What query head `head`'s weighted V sum is multiplied by, from its
// online-softmax state (max m, sum l): 1 / l, or with a sink logit s
// (a.sinks) joining the max and the sum with no value: c / (l c + exp(s - m')),
// m' = max(m, s), c = exp(m - m'). Every kernel applies it once after all
// positions, so the sink adds nothing that depends on the batch.
inline float softmax_inverse(const PagedAttentionArgs& a, int64_t head, float m, float l) {
  if (!a.sinks) return l > 0 ? 1.0f / l : 0.0f;
  const float s = a.sinks[head];
  const float mx = std::max(m, s);
  const float c = std::exp(m - mx);  // 0 when no position was seen (m = -inf)
  return c / (l * c + std::exp(s - mx));
}

// Work item w of the kernels that take one item per (token, KV head),
// token-major: the token, its KV head, its sequence's block table, how many
// positions it attends to, and the first query row of the KV head's group.
struct HeadItem {
  int32_t t, kvh;
  const int32_t* table;
  int32_t n_ctx;
  const float* q0;
};
inline HeadItem head_item(const PagedAttentionArgs& a, int64_t w) {
  const auto t = static_cast<int32_t>(w / a.n_kv_heads);
  const auto kvh = static_cast<int32_t>(w % a.n_kv_heads);
  const int64_t q_row = static_cast<int64_t>(kvh) * (a.n_heads / a.n_kv_heads) * a.head_dim;
  return {t, kvh, a.block_tables[a.token_seq[t]], a.token_pos[t] + 1, a.q + t * a.q_stride + q_row};
}

// AVX2 + FMA + F16C, for head_dim a multiple of 8 and f16, f32 or q8_0
// caches: per (tile of a prompt's tokens, KV head) over the tile's segments
// of positions (a decode token's segments apart, in a batch of few tokens),
// the query rows of the tile and GQA group four at a time over each chunk's
// K and V rows (read from the cache, converted in registers), eight scores per
// tree of adds, the online-softmax update with a vectorised exp, V rows
// weighted in slices of registers; segments' states folded in order.
void attention_avx2(const PagedAttentionArgs& a, ThreadPool& pool);

// The most floats of split decode tokens' segment states attention_avx2 keeps
// (16 MiB); past it a token folds its segments in one unit per KV head. Tests
// lower it (0 restores the default) to reach that path on small shapes.
size_t avx2_max_part_floats();
void set_avx2_max_part_floats(size_t floats);

}  // namespace pagellm::cpu::detail
