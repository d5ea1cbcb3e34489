// The activation of a gated feed-forward block, gate <- act(gate) * up:
// shared by every backend.
#pragma once

namespace pagellm {

enum class Activation {
  kSilu,      // v / (1 + exp(-v))                                  (llama, qwen, phi3, olmo2)
  kGeluTanh,  // 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))     (gemma)
  kSigmoid,   // 1 / (1 + exp(-v)): Qwen3.5's attention output gate
  // gpt-oss's clamped SwiGLU, limit 7 and alpha 1.702 (fixed, no GGUF key):
  // g = min(v, 7), u = clamp(up, -7, 7), gate <- g * sigmoid(1.702 g) * (u + 1)
  kSwigluClamped,
};

inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kSilu: return "silu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kSwigluClamped: return "clamped swiglu";
  }
  return "?";
}

}  // namespace pagellm
