// The gated delta-net block (Qwen3.5's recurrent layers): linear attention
// whose memory is a fixed-size state per sequence instead of K/V per token.
//   h = rms_norm(x); qkv = W_in h; z = W_z h; beta = W_beta h; alpha = W_alpha h
//   c = silu(causal_conv(qkv))               (the sequence's last inputs carried)
//   o = gated_delta_rule(q, k, v of c; alpha, beta)   (the state carried)
//   x += W_out (rms_norm_per_head(o) * silu(z))
// Ops and layouts: backend/recurrent_args.h.
#pragma once

#include "model/blocks.h"

namespace pagellm {

void delta_net_tensors(const ModelHParams& hp, int32_t layer, TensorList& out);
// x += the block's output; the layer's conv and delta states advance past the step's tokens.
void delta_net_block(LayerContext& c);

}  // namespace pagellm
