// Causal attention over a paged KV cache on the device, for a flattened batch
// of tokens from any number of sequences: decode (one token per sequence),
// prefill and chunked prefill are the same call. The contract of
// backend/cpu/paged_attention.h, with device pointers and a flat block table.
//
// Layouts and arguments: backend/attention_args.h, all in device memory, the
// block tables as one array (`block_table_flat`, `block_table_stride` ints a
// sequence; entries past a sequence's length unused).
//
// A context is cut into partitions of kCudaAttentionPartition positions. One
// thread block per (token, head) takes them in turn: its 4 warps take
// interleaved chunks of 32 positions of a partition, each with an online
// softmax, merged at the partition's end, and the partitions are merged in
// order. When few (token, head) pairs would leave most of the GPU idle
// (batch-1 decode of a long context), the split launch gives each partition a
// thread block of its own, writing its partial softmax to a workspace that a
// second kernel merges in the same order: the same bits as the one-block
// launch, so a token's result does not depend on the batch. The result
// matches the CPU kernel to f32 rounding (sums are in a different order).
// Limits: head_dim <= 576 with at most 512 values per head (a multiple of 32
// for Q8_0), n_heads a multiple of n_kv_heads. Heads up to 256 run the
// kernel's small instantiation (a lane's 8 value dims in registers); larger
// ones (Gemma 4's 512, MLA's 576-element latent rows) a large one (16). A
// latent cache (v_dim > 0, MLA): one KV head, V = the first v_dim elements of
// each K row, out rows of n_heads * v_dim (every query head reads the rows
// again: no sharing between a token's heads yet).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/attention_args.h"
#include "backend/backend_sizes.h"
#include "backend/cuda/cuda_device.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {

constexpr int32_t kCudaAttentionMaxHeadDim = 576;   // K row: MLA's latent 512 + rope 64
constexpr int32_t kCudaAttentionMaxValueDim = 512;  // V row (a latent cache's v_dim)
constexpr int32_t kCudaAttentionPartition = 512;  // positions
// The split launch is for steps of fewer (token, head) pairs than this, whose
// partials fit in kCudaAttentionMaxWorkspace (the planner counts it:
// planner/model_footprint.h).
constexpr int64_t kCudaAttentionSplitBelow = 1024;

// The split launch: `parts` thread blocks per (token, head), one per
// partition; partials: attention_workspace_bytes of device memory.
struct AttentionSplit {
  int32_t parts = 1;
  float* partials = nullptr;
};

// The partitions of the longest context the step's block tables can hold
// (block_table_stride * block_size positions) when the step is small enough
// for the split launch; otherwise 1 (one thread block per (token, head)).
// The same for every step of a shape, so a recorded step stays valid.
int32_t attention_partitions(const PagedAttentionArgs& args);
size_t attention_workspace_bytes(const PagedAttentionArgs& args, int32_t parts);

// Throws ConfigError for shapes the kernel does not handle (on the host,
// before any CUDA call).
void validate(const PagedAttentionArgs& args);

// q8_dst (optional, 16-byte aligned): the output rows also as int8
// activations (q8_activations.h: n_tokens vectors of n_heads * head_dim, the
// bytes quantize_q8_activations would make of them), for the output
// projection's int8 GEMV without a launch of its own; head_dim a multiple of
// 32 (ConfigError otherwise).
// split: as attention_partitions says (any parts give the same bits).
void paged_attention(const CudaDevice& dev, const PagedAttentionArgs& args, void* q8_dst = nullptr,
                     AttentionSplit split = {});

// The same computation on the host (host pointers, flat block table), by the
// kernel's own per-lane code with its warp reductions spelled out: tests check
// the kernel's indexing and softmax merge without a GPU.
void paged_attention_host(const PagedAttentionArgs& args, void* q8_dst = nullptr);

}  // namespace pagellm::cuda
