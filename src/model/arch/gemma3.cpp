// gemma3: Gemma 3 (text). The Gemma block with per-head q/k RMSNorm; five of
// every six layers attend over a sliding window with their own RoPE base
// (rope.freq_base_swa, default 10000, unscaled), the sixth over everything.
#include <memory>

#include "model/blocks.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.qk_norm = QkNorm::kPerHead, .post_norm = true};
constexpr FfnOptions kFfn{.post_norm = true};

class Gemma3 final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "gemma3"; }
  void configure(const GgufFile& f, ModelHParams& hp) const override {
    set_gemma_common(hp, 62);
    hp.final_softcap = positive_f32_key(f, "gemma3.final_logit_softcapping", 0);
    const int32_t window = window_key(f, "gemma3.attention.sliding_window");
    if (window == 0) return;
    set_window_pattern(hp, window, 6);
    hp.rope_tables.push_back({positive_f32_key(f, "gemma3.rope.freq_base_swa", 10000.0f), 1.0f});
    for (LayerSpec& l : hp.layers)
      if (l.window > 0) l.rope_table = 1;
  }
};

}  // namespace

std::unique_ptr<Architecture> make_gemma3() { return std::make_unique<Gemma3>(); }

}  // namespace pagellm
