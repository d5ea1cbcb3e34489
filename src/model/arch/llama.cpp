// llama: Llama 1/2/3 (Llama 3.1+ rope_freqs.weight frequency factors),
// Mistral, SmolLM, TinyLlama, and Mixtral (llama with experts: routed SwiGLU
// experts, softmax top-k renormalised). The plain block: RMSNorm, attention
// with adjacent-pair RoPE, SwiGLU.
#include <memory>

#include "model/blocks.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{};
constexpr FfnOptions kFfn{};

class Llama final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "llama"; }
  void configure(const GgufFile& f, ModelHParams& hp) const override {
    if (f.find_tensor("rope_freqs.weight")) hp.rope_tables[0].factors = "rope_freqs.weight";
  }
};

}  // namespace

std::unique_ptr<Architecture> make_llama() { return std::make_unique<Llama>(); }

}  // namespace pagellm
