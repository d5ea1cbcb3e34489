// qwen35: Qwen3.5 (dense hybrid). Gated delta-net layers (model/delta_net_block.h)
// beside gated full-attention layers: attention.recurrent_layers says which
// (else every layer but each full_attention_interval-th is recurrent). The
// full layers: per-head q/k RMSNorm, q projection rows [q, gate] per head and
// the output times sigmoid(gate), NeoX RoPE on the first rope.dimension_count
// dims (imrope with text positions), GQA. post_attention_norm is the FFN's
// pre-norm.
#include <memory>

#include "model/blocks.h"
#include "model/delta_net_block.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.qk_norm = QkNorm::kPerHead};
constexpr FfnOptions kFfn{.pre_norm_name = "post_attention_norm"};

class Qwen35 final : public DeltaNetHybridArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "qwen35"; }
  void configure(const GgufFile& f, ModelHParams& hp) const override {
    configure_delta_net_hybrid(f, hp);
  }
};

}  // namespace

std::unique_ptr<Architecture> make_qwen35() { return std::make_unique<Qwen35>(); }

}  // namespace pagellm
