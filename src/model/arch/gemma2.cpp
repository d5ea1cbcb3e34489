// gemma2: Gemma 2. The Gemma block (embeddings x sqrt(n_embd), GELU,
// post-norms after attention and FFN) with a sliding window on every other
// layer and soft caps on attention scores and final logits.
#include <memory>

#include "model/blocks.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.post_norm = true};
constexpr FfnOptions kFfn{.post_norm = true};

class Gemma2 final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "gemma2"; }
  void configure(const GgufFile& f, ModelHParams& hp) const override {
    set_gemma_common(hp, 46);
    set_window_pattern(hp, window_key(f, "gemma2.attention.sliding_window"), 2);
    hp.attn_softcap = positive_f32_key(f, "gemma2.attn_logit_softcapping", 0);
    hp.final_softcap = positive_f32_key(f, "gemma2.final_logit_softcapping", 0);
  }
};

}  // namespace

std::unique_ptr<Architecture> make_gemma2() { return std::make_unique<Gemma2>(); }

}  // namespace pagellm
