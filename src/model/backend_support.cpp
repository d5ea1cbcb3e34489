#include "model/backend_support.h"

#include <fmt/format.h>

#include "util/error.h"

namespace pagellm {

void check_backend_supports(const Backend& b, const KvPoolPlacement& p, const ModelHParams& hp,
                            const std::vector<RopeParams>& ropes) {
  const auto need = [&](BackendOp op, bool used) {
    if (used && !b.supports(op))
      throw ConfigError(fmt::format("{} ({}) cannot run layers {}-{} of this {} model: it lacks {}",
                                    p.device, b.name(), p.layer_begin, p.layer_end - 1, hp.arch,
                                    backend_op_name(op)));
  };
  need(BackendOp::kGeluTanh, hp.ffn_act == Activation::kGeluTanh);
  need(BackendOp::kClampedSwiglu, hp.ffn_act == Activation::kSwigluClamped);
  need(BackendOp::kMixtureOfExperts, hp.moe());
  need(BackendOp::kAttentionSoftcap, hp.attn_softcap > 0);
  bool shares_kv = false;
  for (const LayerSpec& spec : hp.layers) shares_kv = shares_kv || spec.kv_source >= 0;
  need(BackendOp::kPerLayerInputs, hp.n_embd_per_layer > 0 || shares_kv);
  // A layer reading another layer's KV on a device of its own memory needs
  // that cache there (a pool is in one backend's memory).
  for (int32_t l = p.layer_begin; l < p.layer_end && !b.uses_host_memory(); ++l) {
    const int32_t src = hp.layers[static_cast<size_t>(l)].kv_source;
    if (src >= 0 && (src < p.layer_begin || src >= p.layer_end))
      throw ConfigError(fmt::format("{} ({}) cannot run layer {} of this {} model without layer {}, "
                                    "whose KV cache it reads",
                                    p.device, b.name(), l, hp.arch, src));
  }
  bool window = false, factors = false;
  for (int32_t l = p.layer_begin; l < p.layer_end; ++l) {
    const LayerSpec& spec = hp.layers[static_cast<size_t>(l)];
    window = window || spec.window > 0;
    const RopeParams& r = ropes[static_cast<size_t>(spec.rope_table)];
    factors = factors || r.freq_factors || r.attn_factor != 1.0f;
  }
  need(BackendOp::kAttentionWindow, window);
  need(BackendOp::kRopeFactors, factors);
  bool recurrent = false, gated = false;
  for (int32_t l = p.layer_begin; l < p.layer_end; ++l) {
    recurrent = recurrent || hp.layers[static_cast<size_t>(l)].recurrent;
    gated = gated || (hp.attn_output_gate && !hp.layers[static_cast<size_t>(l)].recurrent);
  }
  need(BackendOp::kRecurrentState, recurrent);
  need(BackendOp::kLatentAttention, hp.mla.enabled());
  need(BackendOp::kSigmoidGate, gated);
}

}  // namespace pagellm
