// qwen3moe: Qwen 3 mixture of experts (Qwen3-30B-A3B, Qwen3-235B-A22B). The
// Qwen 3 attention block (per-head q/k RMSNorm, NeoX RoPE); the FFN is
// routed experts of expert_feed_forward_length (softmax, top-k, weights
// renormalised), no shared expert.
#include <memory>

#include <fmt/format.h>

#include "model/blocks.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.qk_norm = QkNorm::kPerHead};
constexpr FfnOptions kFfn{};

class Qwen3Moe final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "qwen3moe"; }
  void configure(const GgufFile& f, ModelHParams& hp) const override {
    if (!hp.moe())
      throw FormatError(fmt::format("{}: qwen3moe needs 'qwen3moe.expert_count'", f.path()));
    hp.rope_style = RopeStyle::kNeox;
  }
};

}  // namespace

std::unique_ptr<Architecture> make_qwen3moe() { return std::make_unique<Qwen3Moe>(); }

}  // namespace pagellm
