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

namespace scalar {
using cpu::lanes::scalar::Lanes;
#include "backend/cpu/ssm_conv_body.inc"
}  // namespace scalar

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
namespace avx2 {
using cpu::lanes::avx2::Lanes;
#include "backend/cpu/ssm_conv_body.inc"
}  // namespace avx2
PAGELLM_TARGET_END
#endif
#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
namespace avx512 {
using cpu::lanes::avx512::Lanes;
#include "backend/cpu/ssm_conv_body.inc"
}  // namespace avx512
PAGELLM_TARGET_END
#endif

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

void ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch, ThreadPool& pool) {
  ssm_conv(args, batch, pool, cpu::best_isa());
}

void ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch, ThreadPool& pool,
              cpu::CpuIsa isa) {
  if (!cpu::isa_available(isa))
    throw Error(std::string("ssm_conv: the ") + cpu::isa_name(isa) +
                " kernels do not run on this CPU");
  check_ssm_conv_args(args, batch);
  if (batch.n_seqs == 0 || batch.n_tokens() == 0) return;
  auto run = &scalar::run_block;
#if PAGELLM_HAVE_AVX2
  if (isa == cpu::CpuIsa::Avx2) run = &avx2::run_block;
#endif
#if PAGELLM_HAVE_AVX512
  if (isa == cpu::CpuIsa::Avx512) run = &avx512::run_block;
#endif
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
