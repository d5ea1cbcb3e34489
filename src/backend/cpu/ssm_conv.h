// Causal depthwise 1-D convolution with a carried state on the CPU
// (Backend::ssm_conv; arguments and math: backend/recurrent_args.h). Work
// items are (sequence, block of channels); each output element is one fused
// multiply-add chain in tap order (and SiLU through lanes::exp_scalar's
// polynomial), the same operations in every variant, so Scalar, Avx2 and
// Avx512 give the same bits whatever the batch or the split into runs.
#pragma once

#include "backend/cpu/cpu_isa.h"
#include "backend/recurrent_args.h"
#include "util/thread_pool.h"

namespace pagellm {

// With the given kernel variant (tests compare them; Error if this CPU lacks
// it), by default the best one.
void ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch, ThreadPool& pool,
              cpu::CpuIsa isa = cpu::best_isa());

// Throws Error when the arguments are inconsistent (shared with other backends).
void check_ssm_conv_args(const SsmConvArgs& args, const RecurrentBatch& batch);

}  // namespace pagellm
