// Gated delta-net kernels of the CUDA backend: ssm_conv and gated_delta_rule
// (arguments and math: backend/recurrent_args.h). Here every pointer, the
// batch's arrays included (token_begin, state_slot, first_pos), is device
// memory; batch.n_seqs is the host count. Queued on dev.stream().
//
// Bits against the CPU kernels (backend/cpu/ssm_conv.h, delta_rule.h):
//   ssm_conv: the same per-element operations, so the same bits.
//   gated_delta_rule: every token takes the CPU's recurrent step (one block
//     per sequence and value head, one thread per state column): the CPU's
//     bits for one-token pieces (decode); pieces the CPU runs in the chunked
//     form agree to float rounding (~1e-6 relative), not bit for bit. The
//     device's log1pf (in the decay) may differ from the host's by an ulp;
//     the host renditions below use the host's, as the CPU does.
// CudaBackend::ssm_conv / gated_delta_rule call these; a prompt runs token
// by token (a chunked device form is the follow-up).
#pragma once

#include "backend/cuda/cuda_device.h"
#include "backend/recurrent_args.h"

namespace pagellm::cuda {

void ssm_conv(const CudaDevice& dev, const SsmConvArgs& args, const RecurrentBatch& batch);
void gated_delta_rule(const CudaDevice& dev, const GatedDeltaArgs& args,
                      const RecurrentBatch& batch);

// The kernels' per-element code run on the host (host memory everywhere):
// tests check it against the CPU kernels without a GPU.
void ssm_conv_host(const SsmConvArgs& args, const RecurrentBatch& batch);
void gated_delta_rule_host(const GatedDeltaArgs& args, const RecurrentBatch& batch);

}  // namespace pagellm::cuda
