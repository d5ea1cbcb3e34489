// The arguments of paged attention, shared by every backend's kernel: causal
// attention over a paged KV cache for a flattened batch of tokens from any
// number of sequences (decode, prefill and chunked prefill are one call).
//
// Layouts (in the memory of the backend that runs the kernel):
//   q    [n_tokens][n_heads][head_dim] f32, row stride q_stride floats
//   out  [n_tokens][n_heads][head_dim] f32, row stride out_stride floats
//   k_cache, v_cache  [slots][n_kv_heads][head_dim] of kv_type (F16, F32, or Q8_0:
//        each head row is head_dim / 32 Q8_0 blocks);
//        slot = table[p / block_size] * block_size + p % block_size
//   token_seq[t]  index of the sequence token t belongs to
//   token_pos[t]  its position; it attends to positions 0..token_pos[t] of its
//                 sequence (which must already be in the cache, this step's too),
//                 or with window > 0 to the last `window` of them only
//   softcap > 0   scores become softcap * tanh(score / softcap) (after scale)
//   sinks         null, or [n_heads] f32 raw logits (not scaled), one per query
//                 head, that join the softmax's max and denominator but have no
//                 value (gpt-oss's attention sinks)
//   the block ids of sequence s, in position order, either as
//     block_tables[s]                                   (row pointers: the CPU) or
//     block_table_flat + s * block_table_stride          (one array: CUDA)
// Query head h reads KV head h / (n_heads / n_kv_heads).
// v_dim > 0: a latent cache (MLA, kvcache/kv_pool.h): there is no V of its
// own, a position's value is the first v_dim elements of its K row (v_cache
// == k_cache), and out rows are n_heads * v_dim (out_stride floats apart).
// (No other includes: CUDA kernels take the struct by value.)
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace pagellm {

struct PagedAttentionArgs {
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  int32_t n_tokens = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  DType kv_type = DType::F16;
  int32_t block_size = 16;
  const int32_t* token_seq = nullptr;
  const int32_t* token_pos = nullptr;
  const int32_t* const* block_tables = nullptr;
  const int32_t* block_table_flat = nullptr;
  int32_t block_table_stride = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
  int32_t window = 0;  // 0: every earlier position
  float softcap = 0.0f;
  int32_t v_dim = 0;  // > 0: latent cache, values from the K rows
  const float* sinks = nullptr;  // [n_heads] or null
};

// The first position token t attends to.
inline int32_t attention_first_pos(const PagedAttentionArgs& a, int32_t t) {
  const int32_t p = a.token_pos[t];
  return a.window > 0 && p >= a.window ? p - a.window + 1 : 0;
}

}  // namespace pagellm
