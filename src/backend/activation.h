// The activation of a gated feed-forward block, gate <- act(gate) * up:
// shared by every backend.
#pragma once

namespace pagellm {

enum class Activation {
  kSilu,      // v / (1 + exp(-v))                                  (llama, qwen, phi3, olmo2)
  kGeluTanh,  // 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))     (gemma)
  kSigmoid,   // 1 / (1 + exp(-v)): Qwen3.5's attention output gate
};

inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kSilu: return "silu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kSigmoid: return "sigmoid";
  }
  return "?";
}

}  // namespace pagellm
