// The activation of a gated feed-forward block, gate <- act(gate) * up:
// shared by every backend.
#pragma once

namespace pagellm {

enum class Activation {
  kSilu,      // v / (1 + exp(-v))                                  (llama, qwen, phi3, olmo2)
  kGeluTanh,  // 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))     (gemma)
};

inline const char* activation_name(Activation a) {
  return a == Activation::kSilu ? "silu" : "gelu_tanh";
}

}  // namespace pagellm
