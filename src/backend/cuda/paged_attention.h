// Causal attention over a paged KV cache on the device, for a flattened batch
// of tokens from any number of sequences: decode (one token per sequence),
// prefill and chunked prefill are the same call. The contract of
// backend/cpu/paged_attention.h, with device pointers and a flat block table.
//
// Layouts (all device memory):
//   q    [n_tokens][n_heads][head_dim] f32, row stride q_stride floats
//   out  [n_tokens][n_heads][head_dim] f32, row stride out_stride floats
//   k_cache, v_cache  [slots][n_kv_heads][head_dim] of kv_type (F16, F32, or
//        Q8_0: each head row is head_dim / 32 Q8_0 blocks);
//        slot = block_tables[s][p / block_size] * block_size + p % block_size
//   token_seq[t]  int32, index of the sequence token t belongs to
//   token_pos[t]  int32, its position; it attends to positions 0..token_pos[t]
//                 of its sequence (already in the cache, this step's too)
//   block_tables  [n_seqs][block_table_stride] int32: block ids of sequence s
//                 in position order (entries past a sequence's length unused)
// Query head h reads KV head h / (n_heads / n_kv_heads) (GQA).
//
// One thread block per (token, head); its 4 warps take interleaved chunks of
// 32 positions, each with an online softmax, merged at the end. The result
// matches the CPU kernel to f32 rounding (sums are in a different order).
// Limits: head_dim <= 256 (a multiple of 32 for Q8_0), n_heads a multiple of
// n_kv_heads.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_device.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {

struct CudaPagedAttentionArgs {
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
  const int32_t* block_tables = nullptr;
  int32_t block_table_stride = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
};

constexpr int32_t kCudaAttentionMaxHeadDim = 256;

// Throws ConfigError for shapes the kernel does not handle (on the host,
// before any CUDA call).
void validate(const CudaPagedAttentionArgs& args);

void paged_attention(const CudaDevice& dev, const CudaPagedAttentionArgs& args);

}  // namespace pagellm::cuda
