// Element-wise and row-wise CPU kernels of the transformer block. All tensors
// are row-major f32: `rows` rows of `n` floats, row stride = n unless given.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/activation.h"
#include "backend/rope_style.h"

namespace pagellm {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight   (out may alias x)
void rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t n, float eps);

// x[r] += y[r]
void add_inplace(float* x, const float* y, int64_t count);

// gate[i] = silu(gate[i]) * up[i], silu(v) = v / (1 + exp(-v))
void silu_mul(float* gate, const float* up, int64_t count);

// gate[i] = gelu_tanh(gate[i]) * up[i] (backend/activation.h)
void gelu_tanh_mul(float* gate, const float* up, int64_t count);
// gate[i] = act(gate[i]) * up[i]
void glu(Activation act, float* gate, const float* up, int64_t count);

// x[r] += bias for each of `rows` rows of n floats
void add_bias(float* x, const float* bias, int64_t rows, int64_t n, int64_t stride);

// Cos/sin of every (position, pair) a batch needs, computed once per step
// and shared by the layers of one RoPE table:
//   angle = pos * freq_scale * base^(-2i / n_rot) / factors[i]
// (factors: Llama 3.1 / LongRoPE frequency factors, n_rot / 2 of them, or
// none), cos and sin times attn_factor (LongRoPE's magnitude scaling).
class RopeCache {
 public:
  RopeCache(int32_t n_rot, float freq_base, float freq_scale, const float* factors = nullptr,
            float attn_factor = 1.0f)
      : n_rot_(n_rot),
        freq_base_(freq_base),
        freq_scale_(freq_scale),
        attn_factor_(attn_factor),
        factors_(factors ? std::vector<float>(factors, factors + n_rot / 2) : std::vector<float>{}) {}
  void prepare(const int32_t* positions, int64_t n_tokens);
  // Rotates the first n_rot dims of each of n_heads heads of head_dim in the
  // rows of x (row t uses positions[t] from prepare()).
  void apply(float* x, int64_t n_tokens, int64_t stride, int32_t n_heads, int32_t head_dim,
             RopeStyle style) const;

 private:
  int32_t n_rot_;
  float freq_base_;
  float freq_scale_;
  float attn_factor_;
  std::vector<float> factors_;
  std::vector<float> cos_, sin_;  // [n_tokens][n_rot / 2]
};

}  // namespace pagellm
