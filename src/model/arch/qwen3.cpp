// qwen3: Qwen 3 (dense). No biases; RMSNorm on each head of q and k before
// RoPE (NeoX); head size from attention.key_length.
#include <memory>

#include "model/blocks.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.qk_norm = QkNorm::kPerHead};
constexpr FfnOptions kFfn{};

class Qwen3 final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "qwen3"; }
  void configure(const GgufFile&, ModelHParams& hp) const override {
    hp.rope_style = RopeStyle::kNeox;
  }
};

}  // namespace

std::unique_ptr<Architecture> make_qwen3() { return std::make_unique<Qwen3>(); }

}  // namespace pagellm
