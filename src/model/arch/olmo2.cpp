// olmo2: OLMo 2. No pre-norms: RMSNorm on each block's output before the
// residual add; RMSNorm over the whole q and k projections; NeoX RoPE.
#include <memory>

#include "model/blocks.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{
    .pre_norm = false, .qk_norm = QkNorm::kWhole, .post_norm = true};
constexpr FfnOptions kFfn{.pre_norm = false, .post_norm = true};

class Olmo2 final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "olmo2"; }
  void configure(const GgufFile&, ModelHParams& hp) const override {
    hp.rope_style = RopeStyle::kNeox;
  }
};

}  // namespace

std::unique_ptr<Architecture> make_olmo2() { return std::make_unique<Olmo2>(); }

}  // namespace pagellm
