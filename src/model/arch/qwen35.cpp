// qwen35: Qwen3.5 (dense hybrid). Gated delta-net layers (model/delta_net_block.h)
// beside gated full-attention layers: attention.recurrent_layers says which
// (else every layer but each full_attention_interval-th is recurrent). The
// full layers: per-head q/k RMSNorm, q projection rows [q, gate] per head and
// the output times sigmoid(gate), NeoX RoPE on the first rope.dimension_count
// dims (imrope with text positions), GQA. post_attention_norm is the FFN's
// pre-norm.
#include <fmt/format.h>

#include <memory>

#include "model/blocks.h"
#include "model/delta_net_block.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.qk_norm = QkNorm::kPerHead};
constexpr FfnOptions kFfn{.pre_norm_name = "post_attention_norm"};

class Qwen35 final : public Architecture {
 public:
  const char* name() const override { return "qwen35"; }

  void configure(const GgufFile& f, ModelHParams& hp) const override {
    const std::string a = hp.arch + ".";
    hp.rope_style = RopeStyle::kNeox;
    hp.attn_output_gate = true;
    DeltaNetShape& d = hp.delta_net;
    d.conv_kernel = require_positive_key(f, a + "ssm.conv_kernel", 64);
    d.d_k = require_positive_key(f, a + "ssm.state_size", 4096);
    d.n_k_heads = require_positive_key(f, a + "ssm.group_count", 4096);
    d.n_v_heads = require_positive_key(f, a + "ssm.time_step_rank", 4096);
    const int32_t inner = require_positive_key(f, a + "ssm.inner_size");
    if (d.n_v_heads % d.n_k_heads != 0 || inner % d.n_v_heads != 0)
      throw FormatError(fmt::format(
          "{}: ssm.time_step_rank {} must be a multiple of ssm.group_count {} and divide "
          "ssm.inner_size {}",
          f.path(), d.n_v_heads, d.n_k_heads, inner));
    d.d_v = inner / d.n_v_heads;
    if (const GgufValue* v = f.find(a + "attention.recurrent_layers")) {
      const auto& flags = v->as_array(a + "attention.recurrent_layers");
      if (flags.size() != static_cast<size_t>(hp.n_layer))
        throw FormatError(fmt::format("{}: attention.recurrent_layers has {} entries for {} layers",
                                      f.path(), flags.size(), hp.n_layer));
      for (int32_t l = 0; l < hp.n_layer; ++l)
        hp.layers[static_cast<size_t>(l)].recurrent =
            flags[static_cast<size_t>(l)].as_bool(a + "attention.recurrent_layers");
    } else {
      const int32_t interval = require_positive_key(f, a + "full_attention_interval", 4096);
      for (int32_t l = 0; l < hp.n_layer; ++l)
        hp.layers[static_cast<size_t>(l)].recurrent = (l + 1) % interval != 0;
    }
  }

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

}  // namespace

std::unique_ptr<Architecture> make_qwen35() { return std::make_unique<Qwen35>(); }

}  // namespace pagellm
