#include "model/rope_yarn.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace pagellm {

namespace {

// The pair index where the wavelength is n_orig / beta rotations' worth.
double correction_dim(int32_t n_rot, int32_t n_orig, double beta, double base) {
  return n_rot * std::log(n_orig / (beta * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

std::vector<float> yarn_freq_factors(const YarnSpec& y, int32_t n_rot, float freq_base) {
  const int32_t half = n_rot / 2;
  std::vector<float> out(static_cast<size_t>(half), 1.0f);
  if (!y.enabled()) return out;
  const double low = std::max(0.0, std::floor(correction_dim(n_rot, y.orig_ctx, y.beta_fast, freq_base)));
  const double high =
      std::min<double>(n_rot - 1, std::ceil(correction_dim(n_rot, y.orig_ctx, y.beta_slow, freq_base)));
  const double interp = 1.0 / y.factor;
  for (int32_t i = 0; i < half; ++i) {
    const double t = (i - low) / std::max(0.001, high - low);
    const double ramp = 1.0 - std::clamp(t, 0.0, 1.0);
    out[static_cast<size_t>(i)] = static_cast<float>(1.0 / (interp * (1.0 - ramp) + ramp));
  }
  return out;
}

float yarn_magnitude(float factor) {
  return factor > 1 ? static_cast<float>(1.0 + 0.1 * std::log(static_cast<double>(factor))) : 1.0f;
}

}  // namespace pagellm
