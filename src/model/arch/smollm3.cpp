// smollm3: SmolLM3. The Llama block (adjacent-pair RoPE, GQA, SwiGLU) where
// every fourth layer ((l + 1) % 4 == 0) has no positional rotation (NoPE).
// Like llama.cpp, the interval is fixed: the GGUF has no key for it.
#include <memory>

#include "model/blocks.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{};
constexpr FfnOptions kFfn{};
constexpr int32_t kNopeInterval = 4;

class SmolLM3 final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "smollm3"; }
  void configure(const GgufFile&, ModelHParams& hp) const override {
    for (int32_t l = 0; l < hp.n_layer; ++l)
      hp.layers[static_cast<size_t>(l)].rope = (l + 1) % kNopeInterval != 0;
  }
};

}  // namespace

std::unique_ptr<Architecture> make_smollm3() {
  return std::make_unique<SmolLM3>();
}

}  // namespace pagellm
