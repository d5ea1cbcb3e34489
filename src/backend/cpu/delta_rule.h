// The gated delta rule on the CPU (Backend::gated_delta_rule; arguments and
// math: backend/recurrent_args.h). Work items are (sequence, value head)
// pairs spread over the pool's threads; each item runs its sequence's tokens
// in pieces cut at absolute positions that are multiples of kGatedDeltaChunk.
//
// The operations, per item (every sum a chain of fused multiply-adds in
// index order from the value shown, exp = lanes::exp_scalar's polynomial):
//   inputs  ss = sum_i x_i^2 (from 0); qn_i = (q_i * (1 / sqrt(ss_q + eps))) * q_scale,
//           kn_i = k_i * (1 / sqrt(ss_k + eps)); x = alpha + dt_bias;
//           g = (x > 20 ? x : log1p(exp(x))) * a; beta = 1 / (1 + exp(-b))
//   a piece of one token (the recurrent step), S [d_k][d_v]:
//           S[i][j] = S[i][j] * exp(g); kv[j] = sum_i kn_i S[i][j] (from 0)
//           d[j] = (v[j] - kv[j]) * beta
//           S[i][j] = fma(kn_i, d[j], S[i][j]); o[j] = sum_i qn_i S[i][j] (from 0)
//   a piece of L >= 2 tokens (the chunked WY form), t, s < L:
//           gc_t = g_0 + ... + g_t (in order); gam_t = exp(gc_t); e_ts = exp(gc_t - gc_s)
//           kk_ts = sum_i kn_ti kn_si, qk_ts = sum_i qn_ti kn_si (from 0)
//           A_ts = (kk_ts * e_ts) * beta_t (s < t); P_ts = qk_ts * e_ts (s <= t), 0 (s > t)
//           U_t = beta_t v_t, then U_t -= A_ts U_s for s = 0..t-1 (fma, s order)
//           W_t = (beta_t * gam_t) kn_t, then W_t -= A_ts W_s likewise
//           D_t[j] = U_t[j] - sum_i W_ti S[i][j] (fma chain from U_t[j])
//           o_t[j] = (sum_i qn_ti S[i][j]) * gam_t, then += P_ts D_s[j] for s = 0..L-1
//           S[i][j] = S[i][j] * gam_{L-1}, then += (kn_si * e_{L-1,s}) D_s[j] for s = 0..L-1
// Each output element is so computed by one fixed sequence of operations,
// which the vector variants run lane by lane: Scalar, Avx2 and Avx512 give
// the same bits, and so do the CUDA kernels' host renditions.
#pragma once

#include "backend/cpu/cpu_isa.h"
#include "backend/recurrent_args.h"
#include "util/thread_pool.h"

namespace pagellm {

// With the given kernel variant (tests compare them; Error if this CPU lacks
// it), by default the best one.
void gated_delta_rule(const GatedDeltaArgs& args, const RecurrentBatch& batch, ThreadPool& pool,
                      cpu::CpuIsa isa = cpu::best_isa());

// Throws Error when the arguments are inconsistent (shared with other
// backends: head counts, sizes, the batch's token ranges).
void check_gated_delta_args(const GatedDeltaArgs& args, const RecurrentBatch& batch);

}  // namespace pagellm
