// IQ4_NL and IQ4_XS blocks (layouts in tensor/blocks.h): 4-bit codes that
// index a fixed non-uniform table of 16 values, with one f16 scale per 32
// elements (IQ4_NL) or one f16 scale per 256 and a 6-bit multiplier per 32
// (IQ4_XS).
//
// The encoder fits each 32-element group: it tries scales that put the
// group's largest-magnitude element at or near either end of the table,
// assigns every element its nearest table value, refits the scale by least
// squares for that assignment and keeps the candidate with the smallest
// squared error. Codes are then chosen again against the scale as stored.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace pagellm::detail {

namespace {

constexpr int kGroup = 32;

// Index of the table value nearest v (the lower one on a tie; for NaN the
// value nearest 0).
int nearest_code(float v) {
  int lo = 0, hi = 15;  // kIq4NlValues[lo] <= v < kIq4NlValues[hi] once inside
  if (std::isnan(v)) return 8;
  if (!(v > kIq4NlValues[0])) return 0;
  if (v >= kIq4NlValues[15]) return 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (v < kIq4NlValues[mid] ? hi : lo) = mid;
  }
  return v - kIq4NlValues[lo] <= kIq4NlValues[hi] - v ? lo : hi;
}

// Codes of x[0..32) against scale d (every code 8, value 1, when d is 0).
void assign_codes(const float* x, float d, uint8_t* code) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < kGroup; ++i) code[i] = d != 0.0f ? nearest_code(x[i] * id) : 8;
}

// The best-fitting scale of a 32-element group (0 for an all-zero group).
float fit_group(const float* x) {
  const float max = signed_absmax(x, kGroup);
  if (max == 0.0f) return 0.0f;
  float best_d = 0.0f, best_err = std::numeric_limits<float>::infinity();
  uint8_t code[kGroup];
  for (const float end : {-127.0f, 113.0f}) {
    for (int step = -3; step <= 3; ++step) {
      assign_codes(x, max / (end * (1.0f + 0.03f * static_cast<float>(step))), code);
      double sxq = 0, sqq = 0;
      for (int i = 0; i < kGroup; ++i) {
        const double q = kIq4NlValues[code[i]];
        sxq += x[i] * q;
        sqq += q * q;
      }
      const auto d = static_cast<float>(sxq / sqq);  // sqq >= 32: every |value| >= 1
      float err = 0.0f;
      for (int i = 0; i < kGroup; ++i) {
        const float e = x[i] - d * static_cast<float>(kIq4NlValues[code[i]]);
        err += e * e;
      }
      if (err < best_err) best_err = err, best_d = d;
    }
  }
  return best_d;
}

// A scale as an f16: clamped to the largest finite f16 (65504), NaN as 0, so
// that huge or non-finite inputs decode to finite values.
f16_t scale_f16(float d) {
  if (std::isnan(d)) return fp32_to_fp16(0.0f);
  return fp32_to_fp16(std::clamp(d, -65504.0f, 65504.0f));
}

// Packs 32 codes in Q4_0's nibble order: qs[j] = code[j] | code[j + 16] << 4.
void pack_nibbles(const uint8_t* code, uint8_t* qs) {
  for (int j = 0; j < kGroup / 2; ++j)
    qs[j] = static_cast<uint8_t>(code[j] | (code[j + kGroup / 2] << 4));
}

void decode_group(const uint8_t* qs, float d, float* y) {
  for (int j = 0; j < kGroup / 2; ++j) {
    y[j] = d * static_cast<float>(kIq4NlValues[qs[j] & 15]);
    y[j + kGroup / 2] = d * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
  }
}

}  // namespace

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK4_NL) decode_group(x[b].qs, fp16_to_fp32(x[b].d), y);
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int s = 0; s < QK_K / kGroup; ++s, y += kGroup)
      decode_group(x[b].qs + 16 * s, d * static_cast<float>(iq4_xs_scale(x[b], s)), y);
  }
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  uint8_t code[kGroup];
  for (int64_t b = 0; b < nb; ++b, x += QK4_NL) {
    y[b].d = scale_f16(fit_group(x));
    assign_codes(x, fp16_to_fp32(y[b].d), code);
    pack_nibbles(code, y[b].qs);
  }
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb) {
  constexpr int kSubs = QK_K / kGroup;
  uint8_t code[kGroup];
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    float sub[kSubs];
    for (int s = 0; s < kSubs; ++s) sub[s] = fit_group(x + kGroup * s);
    // The sub-block scale of largest magnitude gets multiplier -32 exactly.
    const float max = signed_absmax(sub, kSubs);
    BlockIQ4_XS& blk = y[b];
    blk.d = scale_f16(max / -32.0f);
    const float d = fp16_to_fp32(blk.d);
    blk.scales_h = 0;
    for (auto& l : blk.scales_l) l = 0;
    for (int s = 0; s < kSubs; ++s) {
      const int ls = d != 0.0f ? clamp_int(nearest_int(sub[s] / d) + 32, 0, 63) : 32;
      blk.scales_l[s / 2] =
          static_cast<uint8_t>(blk.scales_l[s / 2] | ((ls & 15) << (4 * (s % 2))));
      blk.scales_h = static_cast<uint16_t>(blk.scales_h | ((ls >> 4) << (2 * s)));
      assign_codes(x + kGroup * s, d * static_cast<float>(ls - 32), code);
      pack_nibbles(code, blk.qs + 16 * s);
    }
  }
}

}  // namespace pagellm::detail
