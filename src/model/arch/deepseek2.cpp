// deepseek2: DeepSeek V2 / V2-Lite / V3 (and Kimi K2, which reads as V3), as
// the current converter writes them (attention.key_length_mla and split
// attn_k_b / attn_v_b). Multi-head latent attention (model/mla_block.h) over
// a latent cache; adjacent-pair RoPE on the q_pe / k_pe dims with YaRN, whose
// magnitude factor goes into the score scale instead of the rotation:
// scale = mscale^2 / sqrt(nope + rope), mscale = 1 + yarn_log_multiplier *
// ln(factor). The first leading_dense_block_count layers have a dense SwiGLU;
// the others route experts (softmax, or sigmoid with the exp_probs_b
// selection bias, expert_gating_func 2), weights renormalised only with
// expert_weights_norm, times expert_weights_scale, plus expert_shared_count
// ungated shared experts (one SwiGLU of that many times
// expert_feed_forward_length).
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "model/blocks.h"
#include "model/mla_block.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr FfnOptions kFfn{.shared_expert = true, .shared_expert_gate = false};

int32_t key_or(const GgufFile& f, const std::string& key, int32_t fallback) {
  return f.find(key) ? require_positive_key(f, key) : fallback;
}

class DeepSeek2 final : public Architecture {
 public:
  const char* name() const override { return "deepseek2"; }

  void configure(const GgufFile& f, ModelHParams& hp) const override {
    const std::string a = hp.arch + ".";
    const auto bad = [&](const std::string& what) {
      return FormatError(fmt::format("{}: deepseek2: {}", f.path(), what));
    };
    MlaShape& m = hp.mla;
    m.kv_lora_rank = require_positive_key(f, a + "attention.kv_lora_rank", 1 << 16);
    m.q_lora_rank = static_cast<int32_t>(f.get_u64(a + "attention.q_lora_rank").value_or(0));
    if (!f.find(a + "attention.key_length_mla") || !f.find(a + "attention.value_length_mla"))
      throw bad("missing attention.key_length_mla / value_length_mla (a GGUF with attn_kv_b from "
                "an older converter: convert the model again)");
    const int32_t qk = require_positive_key(f, a + "attention.key_length_mla", 1 << 16);
    m.v_head = require_positive_key(f, a + "attention.value_length_mla", 1 << 16);
    m.qk_nope = qk - hp.n_rot;
    m.plain_min_prompt = mla_plain_min_prompt();
    if (m.qk_nope <= 0 || hp.head_dim != m.kv_lora_rank + hp.n_rot || hp.n_head_kv != 1)
      throw bad(fmt::format("key_length {} must be kv_lora_rank {} + rope dims {} (< key_length_mla "
                            "{}) with one KV head (head_count_kv {})",
                            hp.head_dim, m.kv_lora_rank, hp.n_rot, qk, hp.n_head_kv));
    if (key_or(f, a + "attention.value_length", m.kv_lora_rank) != m.kv_lora_rank)
      throw bad("attention.value_length must equal kv_lora_rank");
    // YaRN's magnitude moves from cos/sin into the scores (squared).
    hp.rope_style = RopeStyle::kNorm;
    const float factor = hp.rope_tables[0].yarn.enabled() ? hp.rope_tables[0].yarn.factor : 1.0f;
    hp.rope_tables[0].attn_factor = 1.0f;
    const double log_mul = f.get_f64(a + "rope.scaling.yarn_log_multiplier").value_or(0.0);
    const double mscale = 1.0 + log_mul * std::log(static_cast<double>(factor));
    hp.attn_scale = static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(qk)));

    if (!hp.moe()) return;
    const int32_t dense = static_cast<int32_t>(
        std::min<uint64_t>(f.get_u64(a + "leading_dense_block_count").value_or(0),
                           static_cast<uint64_t>(hp.n_layer)));
    for (int32_t l = 0; l < dense; ++l) hp.layers[static_cast<size_t>(l)].dense_ffn = true;
    hp.n_ff_shexp = require_positive_key(f, a + "expert_shared_count", 64) * hp.n_ff_exp;
    const uint64_t groups = f.get_u64(a + "expert_group_count").value_or(1);
    if (f.get_u64(a + "expert_group_used_count").value_or(groups) < groups)
      throw bad("group-limited expert routing (expert_group_used_count < expert_group_count) is "
                "not supported");
    RouterOptions r;
    const uint64_t gating = f.get_u64(a + "expert_gating_func").value_or(1);
    if (gating != 1 && gating != 2)
      throw bad(fmt::format("expert_gating_func {} is not supported (1: softmax, 2: sigmoid)", gating));
    r.gating = gating == 2 ? ExpertGating::kSigmoid : ExpertGating::kSoftmax;
    r.renormalize = f.get_bool(a + "expert_weights_norm").value_or(false);
    r.scale = positive_f32_key(f, a + "expert_weights_scale", 1.0f);
    hp.router = r;
  }

  void layer_tensors(const ModelHParams& hp, int32_t l, TensorList& out) const override {
    mla_attention_tensors(hp, l, out);
    ffn_tensors(hp, l, kFfn, out);
  }

  void run_layer(LayerContext& c) const override {
    mla_attention_block(c);
    ffn_block(c, kFfn);
  }
};

}  // namespace

std::unique_ptr<Architecture> make_deepseek2() { return std::make_unique<DeepSeek2>(); }

}  // namespace pagellm
