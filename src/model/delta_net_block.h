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

// The Qwen3.5 hybrids' keys (qwen35, qwen35moe): the ssm.* shapes, which
// layers are recurrent (attention.recurrent_layers, else every layer but each
// full_attention_interval-th), NeoX rope, the gated attention output.
void configure_delta_net_hybrid(const GgufFile& f, ModelHParams& hp);

// A family whose layers are a gated delta-net block (recurrent layers) or an
// attention block, then one FFN block.
template <const AttentionOptions& kAttention, const FfnOptions& kFfn>
class DeltaNetHybridArchitecture : public Architecture {
 public:
  void layer_tensors(const ModelHParams& hp, int32_t l, TensorList& out) const override {
    if (hp.layers[static_cast<size_t>(l)].recurrent)
      delta_net_tensors(hp, l, out);
    else
      attention_tensors(hp, l, kAttention, out);
    ffn_tensors(hp, l, kFfn, out);
  }
  void run_layer(LayerContext& c) const override {
    if (c.hp.layers[static_cast<size_t>(c.layer)].recurrent)
      delta_net_block(c);
    else
      attention_block(c, kAttention);
    ffn_block(c, kFfn);
  }
};

}  // namespace pagellm
