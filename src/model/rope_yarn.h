// YaRN RoPE scaling (rope.scaling.type "yarn"), as per-pair frequency
// divisors (RopeParams::freq_factors), so every backend's RoPE runs it as it
// runs Llama 3.1 / LongRoPE factors.
//
// Pair i's angle blends the interpolated frequency (divided by `factor`) and
// the original one: theta_i (ramp_i + (1 - ramp_i) / factor), with ramp_i = 1
// below the correction dim `low`, 0 above `high`, linear between; low / high
// = floor / ceil of n_rot ln(n_orig / (2 pi beta)) / (2 ln base) for beta_fast
// / beta_slow (clamped to [0, n_rot - 1]), as llama.cpp computes them.
//
// The magnitude factor 1 + 0.1 ln(factor) that YaRN multiplies cos and sin by
// is apart (yarn_magnitude): the common key reader sets it as the table's
// attn_factor; a family that moves it into the attention scale instead
// (deepseek2) sets attn_factor back to 1.
#pragma once

#include <cstdint>
#include <vector>

namespace pagellm {

struct YarnSpec {
  float factor = 0;       // rope.scaling.factor; 0: no YaRN
  int32_t orig_ctx = 0;   // rope.scaling.original_context_length
  float beta_fast = 32;   // rope.scaling.yarn_beta_fast
  float beta_slow = 1;    // rope.scaling.yarn_beta_slow
  bool enabled() const { return factor > 0; }
  bool operator==(const YarnSpec&) const = default;
};

// n_rot / 2 divisors: inv_freq_i / divisor_i is pair i's YaRN frequency.
std::vector<float> yarn_freq_factors(const YarnSpec& y, int32_t n_rot, float freq_base);

// 1 + 0.1 ln(factor) (1 for factor <= 1).
float yarn_magnitude(float factor);

}  // namespace pagellm
