// qwen35moe: Qwen3.5 mixture of experts (Qwen3.5-35B-A3B, -397B-A17B). The
// qwen35 hybrid layers (gated delta-net or gated full attention, see
// qwen35.cpp) with an MoE FFN on every layer, as llama.cpp reads it: routed
// experts (softmax, top-k, weights renormalised) of expert_feed_forward_length
// (else feed_forward_length / expert_used_count), plus a shared expert of
// expert_shared_feed_forward_length (else feed_forward_length) weighed per
// token by sigmoid(x' . ffn_gate_inp_shexp).
#include <fmt/format.h>

#include <memory>

#include "model/blocks.h"
#include "model/delta_net_block.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.qk_norm = QkNorm::kPerHead};
constexpr FfnOptions kFfn{.pre_norm_name = "post_attention_norm", .shared_expert = true};

class Qwen35Moe final : public DeltaNetHybridArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "qwen35moe"; }
  void configure(const GgufFile& f, ModelHParams& hp) const override {
    const std::string a = hp.arch + ".";
    if (!hp.moe())
      throw FormatError(fmt::format("{}: qwen35moe needs '{}expert_count'", f.path(), a));
    configure_delta_net_hybrid(f, hp);
    if (!f.find(a + "expert_feed_forward_length")) {
      hp.n_ff_exp = hp.n_ff / hp.n_expert_used;
      if (hp.n_ff_exp <= 0)
        throw FormatError(fmt::format("{}: no {}expert_feed_forward_length and "
                                      "feed_forward_length {} < expert_used_count {}",
                                      f.path(), a, hp.n_ff, hp.n_expert_used));
    }
    hp.n_ff_shexp = f.find(a + "expert_shared_feed_forward_length")
                        ? require_positive_key(f, a + "expert_shared_feed_forward_length")
                        : hp.n_ff;
  }
};

}  // namespace

std::unique_ptr<Architecture> make_qwen35moe() { return std::make_unique<Qwen35Moe>(); }

}  // namespace pagellm
