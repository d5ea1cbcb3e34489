// Causal attention over a paged KV cache on the CPU, for a flattened batch of
// tokens from any number of sequences. Layouts and arguments:
// backend/attention_args.h (block tables as row pointers, `block_tables`).
//
// Each (token, head) is reduced over positions in increasing order with an
// online softmax (with AVX-512: in chunks of 16 positions from position 0, one
// rescale per chunk and a vectorised exp), so a token's output does not
// depend on the batch it is in.
#pragma once

#include <cstdint>

#include "backend/attention_args.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace pagellm {

void paged_attention(const PagedAttentionArgs& args, ThreadPool& pool);

}  // namespace pagellm
