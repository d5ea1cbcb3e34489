// Causal attention over a paged KV cache on the CPU, for a flattened batch of
// tokens from any number of sequences. Layouts and arguments:
// backend/attention_args.h (block tables as row pointers, `block_tables`).
//
// Each (token, head) is reduced over positions in increasing order with an
// online softmax (AVX2, AVX-512: in chunks of 16 positions from position 0,
// one rescale per chunk and a vectorised exp), so a token's output does not
// depend on the batch it is in.
#pragma once

#include <cstdint>

#include "backend/attention_args.h"
#include "backend/cpu/cpu_isa.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace pagellm {

// With the best kernel variant (cpu::best_isa()).
void paged_attention(const PagedAttentionArgs& args, ThreadPool& pool);
// With the given variant (tests compare them); Error if this CPU lacks it.
// Avx512 has its own kernels for f16 and q8_0 caches of head_dim 64 and 128 and runs
// the AVX2 one otherwise; Avx2 serves head sizes that are multiples of 8;
// the rest runs the scalar loop. A latent cache (v_dim > 0) with no window or
// soft cap takes the latent kernel with Avx2 and Avx512 (the same bits in
// both: paged_attention_latent.h).
void paged_attention(const PagedAttentionArgs& args, ThreadPool& pool, cpu::CpuIsa isa);

}  // namespace pagellm
