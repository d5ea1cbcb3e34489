// Paged attention over MLA's latent cache (PagedAttentionArgs::v_dim > 0:
// one row of head_dim values per position, K = the row, V = its first v_dim
// values, one KV head that every query head reads) with AVX2 or AVX-512.
// Internal to backend/cpu: paged_attention() calls it for the vector variants.
//
// Query heads sit in the lanes of a vector (8 or 16 per vector), so each
// position's row, converted once to f32, serves all the heads of a work item:
// the scores of a head vector are sum over i of q[i] * k[i] (one fma per
// element, in order), the online softmax runs lane by lane (chunks of
// kAttnChunk positions from position 0, segments of kLatentSegment positions
// folded in order), and values are accumulated with one fma per position.
// Every lane takes the same operations in every width (lanes.h), so the AVX2
// and AVX-512 variants give the same bits, and a token's bits do not depend on
// its batch, its work item or the threads.
#pragma once

#include <cstdint>

#include "backend/attention_args.h"
#include "backend/cpu/cpu_isa.h"
#include "util/thread_pool.h"

namespace pagellm::cpu::detail {

// Positions per segment (part of the numerics: each segment starts from a
// fresh softmax state, and a token's segments are folded in order), so that a
// decode token can spread its context over the threads.
constexpr int kLatentSegment = 256;

// a.v_dim > 0, a.n_kv_heads == 1, no window or soft cap; isa Avx2 or Avx512
// (Error otherwise, or when this CPU lacks it).
void latent_attention(const PagedAttentionArgs& a, ThreadPool& pool, CpuIsa isa);

}  // namespace pagellm::cpu::detail
