#include "backend/cpu/ssm_conv.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/lanes.h"
#include "util/error.h"

namespace pagellm {
namespace {

using cpu::lanes::exp_scalar;

// Channels per work item: enough for a few vectors, small enough to spread a
// one-sequence prefill over the threads.
constexpr int kChannelBlock = 256;

#define PAGELLM_LANES_BODY "backend/cpu/ssm_conv_body.inc"
#define PAGELLM_LANES_ENTRY run_block
#include "backend/cpu/lanes_variants.inc"

}  // namespace

void check_ssm_conv_args(const SsmConvArgs& a, const RecurrentBatch& b) {
  auto fail = [](const std::string& what) { throw Error("ssm_conv: " + what); };
  if (a.channels <= 0 || a.kernel < 1) fail("channels and kernel must be positive");
  if (a.kernel > 1 && a.state_stride < static_cast<int64_t>(a.kernel - 1) * a.channels)
    fail("state_stride is smaller than a state");
  if (b.n_seqs < 0 || (b.n_seqs > 0 && (!b.token_begin || !b.state_slot)))
    fail("the batch lacks its arrays");
  for (int32_t s = 0; s < b.n_seqs; ++s)
    if (b.token_begin[s + 1] < b.token_begin[s] || b.state_slot[s] < 0)
      fail("sequence " + std::to_string(s) + " has a bad token range or slot");
}

void ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch, ThreadPool& pool,
              cpu::CpuIsa isa) {
  const auto run = lanes_entry(isa, "ssm_conv", args, batch, check_ssm_conv_args);
  if (!run) return;
  const int C = args.channels, K = args.kernel;
  // The taps as rows [kernel][channels], so a vector reads adjacent channels.
  thread_local std::vector<float> wT;
  wT.resize(static_cast<size_t>(K) * C);
  for (int c = 0; c < C; ++c)
    for (int k = 0; k < K; ++k) wT[static_cast<size_t>(k) * C + c] = args.weight[c * K + k];
  const float* taps = wT.data();  // not wT in the workers: theirs is another thread_local
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  pool.parallel_for(static_cast<int64_t>(batch.n_seqs) * blocks, [&](int64_t begin, int64_t end,
                                                                      int) {
    for (int64_t item = begin; item < end; ++item) {
      const int32_t s = static_cast<int32_t>(item / blocks);
      const int c0 = static_cast<int>(item % blocks) * kChannelBlock;
      float* state = args.states + batch.state_slot[s] * args.state_stride;
      run(args, taps, state, batch.token_begin[s], batch.token_begin[s + 1], c0,
          std::min(C, c0 + kChannelBlock));
    }
  });
}

}  // namespace pagellm
