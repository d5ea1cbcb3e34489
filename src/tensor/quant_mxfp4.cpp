// MXFP4 blocks (layout in tensor/blocks.h): 32 E2M1 codes sharing one
// power-of-two scale.
//
// The encoder takes the block's largest magnitude a = m * 2^k (1 <= m < 2)
// and tries the two scales that put a near the top of the E2M1 range: 2^(k-2)
// (a lands on 4..8, so values above 6 clip to 6 but small ones keep a finer
// step) and 2^(k-1) (a lands on 2..4, nothing clips). Each element takes its
// nearest representable value; the scale with the smaller squared error wins
// (the first on a tie).
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "tensor/quant_internal.h"

namespace pagellm::detail {

namespace {

constexpr int kGroup = QK_MXFP4;

// Index (0..7) of the doubled E2M1 magnitude {0,1,2,3,4,6,8,12} nearest a >= 0
// (the smaller one on a tie; NaN gives 0).
int nearest_magnitude(float a) {
  static constexpr float kMid[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};
  int i = 0;
  while (i < 7 && a > kMid[i]) ++i;
  return i;
}

// The code of x against half scale h (x ~= h * kMxfp4Values[code]).
uint8_t code_of(float x, float h) {
  const float v = x / h;
  const int mag = nearest_magnitude(std::fabs(v));
  return static_cast<uint8_t>(mag == 0 ? 0 : (v < 0 ? mag | 8 : mag));
}

double block_error(const float* x, uint8_t e) {
  const float h = mxfp4_half_scale(e);
  double err = 0;
  for (int i = 0; i < kGroup; ++i) {
    if (std::isnan(x[i])) continue;
    const double d = static_cast<double>(x[i]) -
                     static_cast<double>(h) * kMxfp4Values[code_of(x[i], h)];
    err += d * d;
  }
  return err;
}

}  // namespace

void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kGroup) {
    const float h = mxfp4_half_scale(x[b].e);
    for (int j = 0; j < kGroup / 2; ++j) {
      y[j] = h * static_cast<float>(kMxfp4Values[x[b].qs[j] & 15]);
      y[j + kGroup / 2] = h * static_cast<float>(kMxfp4Values[x[b].qs[j] >> 4]);
    }
  }
}

void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kGroup) {
    float amax = 0.0f;  // NaN never compares greater: ignored
    for (int i = 0; i < kGroup; ++i) amax = std::max(amax, std::fabs(x[i]));
    amax = std::min(amax, FLT_MAX);
    uint8_t e = 0;
    if (amax > 0.0f) {
      int k;
      std::frexp(amax, &k);  // amax = m * 2^k, 0.5 <= m < 1: top bit 2^(k-1)
      // Half scale 2^(e - 128) = 2^(k - 1 - 3) puts amax on the doubled 8..16.
      const int lo = std::clamp(k + 124, 0, 254);
      const int hi = std::min(lo + 1, 254);
      e = static_cast<uint8_t>(block_error(x, static_cast<uint8_t>(hi)) <
                                       block_error(x, static_cast<uint8_t>(lo))
                                   ? hi
                                   : lo);
    }
    y[b].e = e;
    const float h = mxfp4_half_scale(e);
    for (int j = 0; j < kGroup / 2; ++j)
      y[b].qs[j] = static_cast<uint8_t>(code_of(x[j], h) | (code_of(x[j + kGroup / 2], h) << 4));
  }
}

}  // namespace pagellm::detail
