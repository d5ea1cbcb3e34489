// qwen2: Qwen 2 / 2.5. The Llama block with q/k/v biases and half-split
// (NeoX) RoPE.
#include <memory>

#include "model/blocks.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.bias = true};
constexpr FfnOptions kFfn{};

class Qwen2 final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "qwen2"; }
  void configure(const GgufFile&, ModelHParams& hp) const override {
    hp.rope_style = RopeStyle::kNeox;
  }
};

}  // namespace

std::unique_ptr<Architecture> make_qwen2() { return std::make_unique<Qwen2>(); }

}  // namespace pagellm
