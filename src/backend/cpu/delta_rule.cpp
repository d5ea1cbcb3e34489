#include "backend/cpu/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/lanes.h"
#include "util/error.h"

namespace pagellm {
namespace {

using cpu::lanes::exp_scalar;

// One thread's buffers for a chunk (sized for kGatedDeltaChunk tokens).
struct ChunkScratch {
  std::vector<float> kn, qn, g, beta, gc, gam, kT, kk, qk, U, W;
  void reserve(int dk, int dv) {
    const size_t C = kGatedDeltaChunk;
    if (kn.size() >= C * dk && U.size() >= C * dv) return;
    kn.assign(C * dk, 0);
    qn.assign(C * dk, 0);
    g.assign(C, 0);
    beta.assign(C, 0);
    gc.assign(C, 0);
    gam.assign(2 * C, 0);  // then a row of exponentials
    kT.assign(C * dk, 0);
    kk.assign(C * C, 0);
    qk.assign(C * C, 0);
    U.assign(C * std::max(dk, dv), 0);
    W.assign(C * dk, 0);
  }
};

#define PAGELLM_LANES_BODY "backend/cpu/delta_rule_body.inc"
#define PAGELLM_LANES_ENTRY run_items
#include "backend/cpu/lanes_variants.inc"

}  // namespace

void check_gated_delta_args(const GatedDeltaArgs& a, const RecurrentBatch& b) {
  auto fail = [](const std::string& what) { throw Error("gated_delta_rule: " + what); };
  if (a.n_k_heads <= 0 || a.n_v_heads <= 0 || a.n_v_heads % a.n_k_heads != 0)
    fail("n_v_heads must be a positive multiple of n_k_heads");
  if (a.d_k <= 0 || a.d_v <= 0 || a.d_k > 1024 || a.d_v > 1024)
    fail("d_k and d_v must be in [1, 1024]");
  if (a.state_stride < static_cast<int64_t>(a.n_v_heads) * a.d_k * a.d_v)
    fail("state_stride is smaller than a state");
  if (b.n_seqs < 0 || (b.n_seqs > 0 && (!b.token_begin || !b.state_slot || !b.first_pos)))
    fail("the batch lacks its arrays");
  for (int32_t s = 0; s < b.n_seqs; ++s)
    if (b.token_begin[s + 1] < b.token_begin[s] || b.first_pos[s] < 0 || b.state_slot[s] < 0)
      fail("sequence " + std::to_string(s) + " has a bad token range, position or slot");
}

void gated_delta_rule(const GatedDeltaArgs& args, const RecurrentBatch& batch, ThreadPool& pool,
                      cpu::CpuIsa isa) {
  const auto run = lanes_entry(isa, "gated_delta_rule", args, batch, check_gated_delta_args);
  if (!run) return;
  const int64_t items = static_cast<int64_t>(batch.n_seqs) * args.n_v_heads;
  pool.parallel_for(items, [&](int64_t begin, int64_t end, int) { run(args, batch, begin, end); });
}

}  // namespace pagellm
