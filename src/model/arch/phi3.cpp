// phi3: Phi-3 / Phi-3.5 / Phi-4-mini. Fused attn_qkv and gate|up matrices,
// NeoX RoPE with LongRoPE frequency factors when the file has them
// (rope_factors_long past the original context, else rope_factors_short).
// A sliding_window key is ignored, as the reference engine does.
#include <memory>

#include "model/blocks.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.fused_qkv = true};
constexpr FfnOptions kFfn{.fused_gate_up = true};

class Phi3 final : public AttentionFfnArchitecture<kAttention, kFfn> {
 public:
  const char* name() const override { return "phi3"; }
  void configure(const GgufFile& f, ModelHParams& hp) const override {
    hp.rope_style = RopeStyle::kNeox;
    const auto original = f.get_u64("phi3.rope.scaling.original_context_length");
    const bool longer = original && static_cast<uint64_t>(hp.n_ctx_train) > *original;
    const char* factors = longer ? "rope_factors_long.weight" : "rope_factors_short.weight";
    RopeTableSpec& rope = hp.rope_tables[0];
    if (f.find_tensor(factors)) rope.factors = factors;
    if (auto af = f.get_f64("phi3.rope.scaling.attn_factor")) rope.attn_factor = static_cast<float>(*af);
  }
};

}  // namespace

std::unique_ptr<Architecture> make_phi3() { return std::make_unique<Phi3>(); }

}  // namespace pagellm
