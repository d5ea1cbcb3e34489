// gpt-oss: OpenAI's open-weight MoE (gpt-oss-20b / 120b; llama.cpp's
// LLM_ARCH_OPENAI_MOE). A Llama-like block with q/k/v/o biases, NeoX RoPE
// with YaRN (common keys), attention sinks (a learned logit per q head in the
// softmax's denominator), a sliding window on every other layer starting
// with layer 0 (the window from attention.sliding_window, the pattern fixed
// as in llama.cpp: no key), and routed experts: top-k of the router's
// logits (with its bias), weights the softmax over the chosen k, each expert a
// clamped SwiGLU with biases. post_attention_norm is the FFN's pre-norm.
#include <memory>

#include <fmt/format.h>

#include "model/blocks.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.bias = true, .out_bias = true, .sinks = true};
constexpr FfnOptions kFfn{.pre_norm_name = "post_attention_norm",
                          .router = {.gating = ExpertGating::kSoftmaxOfChosen},
                          .expert_bias = true};
constexpr int32_t kWindowPattern = 2;  // layers 0, 2, 4, ... slide

class GptOss final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "gpt-oss"; }
  void configure(const GgufFile& f, ModelHParams& hp) const override {
    if (!hp.moe())
      throw FormatError(fmt::format("{}: gpt-oss needs 'gpt-oss.expert_count'", f.path()));
    hp.rope_style = RopeStyle::kNeox;
    hp.ffn_act = Activation::kSwigluClamped;
    set_window_pattern(hp, window_key(f, "gpt-oss.attention.sliding_window"), kWindowPattern);
  }
};

}  // namespace

std::unique_ptr<Architecture> make_gpt_oss() { return std::make_unique<GptOss>(); }

}  // namespace pagellm
