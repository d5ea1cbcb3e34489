// K-quant encoders (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
//
// Each super-block is encoded in two passes: first every sub-block gets its
// own best (scale, min) or scale from a small search, then those per-block
// values are quantized to the super-block's 4/6/8-bit scale codes relative to
// the largest one, and finally every element is re-rounded against the scale
// it will actually be decoded with.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace pagellm::detail {

namespace {

// Below this magnitude a sub-block counts as all zero.
constexpr float kTinyGroupMax = 1e-15f;

struct AffineSearch {
  float first_stretch;  // the first candidate level count is nmax + first_stretch
  float stretch_step;   // ... then grows by this much per candidate
  int steps;            // steps + 1 candidates after the plain min/max mapping
  bool abs_error;       // weigh |error| instead of squared error
};

// Weighted error of x[i] ~ scale * q[i] + min.
float affine_error(int n, const float* x, const float* w, const uint8_t* q, float scale, float min,
                   bool abs_error) {
  float e = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = scale * static_cast<float>(q[i]) + min - x[i];
    e += w[i] * (abs_error ? std::fabs(diff) : diff * diff);
  }
  return e;
}

// Fits x[i] ~ scale * q[i] + min with integer q[i] in [0, nmax], scale >= 0,
// min <= 0 (the represented range always contains zero). Candidates: the
// plain mapping of [min(x, 0), max x] onto the levels, then mappings onto
// slightly fewer or more levels (nmax + first_stretch + k * stretch_step),
// each anchored at the best offset found so far; for each candidate rounding
// the weighted least-squares (scale, min) is solved in closed form, and the
// candidate with the lowest weighted error wins. Writes the levels to q,
// returns scale and sets *neg_min = -min.
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* q, uint8_t* scratch,
                 const AffineSearch& search, float* neg_min) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_wx = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_wx += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::memset(q, 0, static_cast<size_t>(n));
    *neg_min = -lo;
    return 0.0f;
  }
  float inv = static_cast<float>(nmax) / (hi - lo);
  float scale = 1.0f / inv, min = lo;
  for (int i = 0; i < n; ++i)
    q[i] = static_cast<uint8_t>(clamp_int(nearest_int(inv * (x[i] - lo)), 0, nmax));
  float best = affine_error(n, x, w, q, scale, min, search.abs_error);

  for (int k = 0; k <= search.steps; ++k) {
    // The candidate grid is anchored at the best offset found so far, and the
    // level count is summed in this order, as GGML's reference quantizer does,
    // so that results match GGML-made files bit for bit.
    inv = (search.first_stretch + search.stretch_step * static_cast<float>(k) +
           static_cast<float>(nmax)) /
          (hi - min);
    float sum_wl = 0.0f, sum_wl2 = 0.0f, sum_wxl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(inv * (x[i] - min)), 0, nmax);
      scratch[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_wl += w[i] * fl;
      sum_wl2 += w[i] * fl * fl;
      sum_wxl += w[i] * fl * x[i];
    }
    // Normal equations of min over (s, m) of sum w (s l + m - x)^2.
    const float det = sum_w * sum_wl2 - sum_wl * sum_wl;
    if (!(det > 0.0f)) continue;
    float s = (sum_w * sum_wxl - sum_wx * sum_wl) / det;
    float m = (sum_wl2 * sum_wx - sum_wl * sum_wxl) / det;
    if (m > 0.0f) {  // keep zero representable: refit the scale alone
      m = 0.0f;
      s = sum_wxl / sum_wl2;
    }
    const float e = affine_error(n, x, w, scratch, s, m, search.abs_error);
    if (e < best) {
      best = e;
      scale = s;
      min = m;
      std::memcpy(q, scratch, static_cast<size_t>(n));
    }
  }
  *neg_min = -min;
  return scale;
}

// The element of largest magnitude, sign kept; 0 when that is below
// kTinyGroupMax, with q zeroed (such a group quantizes to scale 0).
float signed_absmax_or_zero(int n, const float* x, uint8_t* q) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) >= kTinyGroupMax) return max;
  std::memset(q, 0, static_cast<size_t>(n));
  return 0.0f;
}

// Fits x[i] ~ scale * l[i] with integer l[i] in [-nmax, nmax - 1], weighting
// element i by x[i]^2 (large values matter most). The element of largest
// magnitude starts at level -nmax; stretches nmax + 0.1 k for k = -9..9 are
// tried, each with its least-squares scale, keeping the one that explains the
// most weighted energy (sum w x l)^2 / sum w l^2. Writes l + nmax to q and
// returns the scale (its sign is opposite to the largest element's).
float fit_symmetric(int n, int nmax, const float* x, uint8_t* q) {
  const float max = signed_absmax_or_zero(n, x, q);
  if (max == 0.0f) return 0.0f;
  uint8_t cand[32];
  // best holds the explained energy sum_xl^2 / sum_l2 of the kept candidate as
  // scale * sum_xl, compared by cross-multiplying (GGML's arithmetic, so that
  // near-ties resolve the same way).
  float best = 0.0f, scale = 0.0f;
  bool have = false;
  for (int k : {0, -9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
    const float inv = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    float sum_xl = 0.0f, sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(inv * x[i]), -nmax, nmax - 1);
      cand[i] = static_cast<uint8_t>(l + nmax);
      const float w = x[i] * x[i], fl = static_cast<float>(l);
      sum_xl += w * x[i] * fl;
      sum_l2 += w * fl * fl;
    }
    if (!(sum_l2 > 0.0f)) continue;
    if (!have || sum_xl * sum_xl > best * sum_l2) {
      have = true;
      scale = sum_xl / sum_l2;
      best = scale * sum_xl;
      std::memcpy(q, cand, static_cast<size_t>(n));
    }
  }
  if (!have) {  // cannot happen for a finite nonzero max; keep a defined result
    std::memset(q, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  return scale;
}

// Q3_K's sub-block fit: levels in [-nmax, nmax - 1], start from the largest
// element at -nmax, then improve element by element: each level is moved to
// the one that best fits its value under the least-squares scale of the
// others, when that raises the explained energy (weights x^2). Up to five
// sweeps. Writes l + nmax to q and returns the scale.
float fit_symmetric_refine(int n, int nmax, const float* x, uint8_t* q) {
  const float max = signed_absmax_or_zero(n, x, q);
  if (max == 0.0f) return 0.0f;
  const float inv = -static_cast<float>(nmax) / max;
  int l[32];
  float sum_xl = 0.0f, sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    l[i] = clamp_int(nearest_int(inv * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i], fl = static_cast<float>(l[i]);
    sum_xl += w * x[i] * fl;
    sum_l2 += w * fl * fl;
  }
  for (int sweep = 0; sweep < 5; ++sweep) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i], fl = static_cast<float>(l[i]);
      float xl = sum_xl - w * x[i] * fl;  // sums without element i
      // As in GGML's reference, refine only while the partial sum is positive,
      // which happens when the largest element is negative; kept so that the
      // output is bit-identical.
      if (!(xl > 0.0f)) continue;
      float l2 = sum_l2 - w * fl * fl;
      const int nl = clamp_int(nearest_int(x[i] * l2 / xl), -nmax, nmax - 1);
      if (nl == l[i]) continue;
      const float fnl = static_cast<float>(nl);
      xl += w * x[i] * fnl;
      l2 += w * fnl * fnl;
      if (l2 > 0.0f && xl * xl * sum_l2 > sum_xl * sum_xl * l2) {
        l[i] = nl;
        sum_xl = xl;
        sum_l2 = l2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(l[i] + nmax);
  return sum_l2 > 0.0f ? sum_xl / sum_l2 : 0.0f;
}

// Q4_K/Q5_K sub-block weights: rms of the sub-block plus |x|.
void rms_plus_abs_weights(const float* x, int n, float* w) {
  float sum_x2 = 0.0f;
  for (int i = 0; i < n; ++i) sum_x2 += x[i] * x[i];
  const float rms = std::sqrt(sum_x2 / static_cast<float>(n));
  for (int i = 0; i < n; ++i) w[i] = rms + std::fabs(x[i]);
}

// Shared by Q4_K and Q5_K: fits the eight 32-element sub-blocks, stores the
// 6-bit scale/min codes and the super-block d/dmin, and writes the final
// levels (0..nmax) of all 256 elements to q.
void encode_affine_k(const float* x, int nmax, const AffineSearch& search, f16_t* d_out,
                     f16_t* dmin_out, uint8_t* scales_out, uint8_t* q) {
  float w[32], scale[8], neg_min[8];
  uint8_t scratch[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    rms_plus_abs_weights(x + 32 * j, 32, w);
    scale[j] = fit_affine(32, nmax, x + 32 * j, w, q + 32 * j, scratch, search, &neg_min[j]);
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, neg_min[j]);
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  int ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = clamp_int(nearest_int(inv_scale * scale[j]), 0, 63);
    lm[j] = clamp_int(nearest_int(inv_min * neg_min[j]), 0, 63);
  }
  std::memset(scales_out, 0, K_SCALE_SIZE);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales_out[j] |= static_cast<uint8_t>(ls[j]);
      scales_out[j + 4] |= static_cast<uint8_t>(lm[j]);
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales_out[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(*d_out), dmin = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float sd = d * static_cast<float>(ls[j]);
    uint8_t* qj = q + 32 * j;
    if (sd == 0.0f) continue;  // decodes to -dm whatever the levels; keep the fit's
    const float dm = dmin * static_cast<float>(lm[j]);
    for (int i = 0; i < 32; ++i)
      qj[i] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + i] + dm) / sd), 0, nmax));
  }
}

// Q3_K / Q6_K: each 16-value sub-block of x fitted on its own (levels in
// q, scales in scale[16]); the scale of largest magnitude, with its sign.
float fit_sub_blocks(const float* x, int nmax, bool refine, float* scale, uint8_t* q) {
  for (int j = 0; j < 16; ++j)
    scale[j] = refine ? fit_symmetric_refine(16, nmax, x + 16 * j, q + 16 * j)
                      : fit_symmetric(16, nmax, x + 16 * j, q + 16 * j);
  return signed_absmax(scale, 16);
}

// Then each sub-block's levels again at the scale it is stored with, d x
// codes[j]: l in [lo, -lo - 1], as l - lo in q. A zero scale keeps the fit's
// levels (they decode to 0).
template <class Code>
void requantize_sub_blocks(const float* x, float d, const Code* codes, int lo, uint8_t* q) {
  for (int j = 0; j < 16; ++j) {
    const float sd = d * static_cast<float>(codes[j]);
    if (sd == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      q[16 * j + i] =
          static_cast<uint8_t>(clamp_int(nearest_int(x[16 * j + i] / sd), lo, -lo - 1) - lo);
  }
}

// Packs 2-bit levels (Q2_K values, Q3_K low bits) in the K-quant order.
void pack_2bit(const uint8_t* q, uint8_t* qs) {
  for (int half = 0; half < 2; ++half)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* s = q + 128 * half + l;
      qs[32 * half + l] = static_cast<uint8_t>((s[0] & 3) | ((s[32] & 3) << 2) |
                                               ((s[64] & 3) << 4) | ((s[96] & 3) << 6));
    }
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  const AffineSearch search{-0.5f, 0.1f, 15, true};
  uint8_t q[QK_K], scratch[16];
  float w[16], scale[16], neg_min[16];
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      for (int i = 0; i < 16; ++i) w[i] = std::fabs(x[16 * j + i]);
      scale[j] = fit_affine(16, 3, x + 16 * j, w, q + 16 * j, scratch, search, &neg_min[j]);
      max_scale = std::max(max_scale, scale[j]);
      max_min = std::max(max_min, neg_min[j]);
    }
    int ls[16] = {}, lm[16] = {};
    if (max_scale > 0.0f)
      for (int j = 0; j < 16; ++j)
        ls[j] = clamp_int(nearest_int(15.0f / max_scale * scale[j]), 0, 15);
    if (max_min > 0.0f)
      for (int j = 0; j < 16; ++j)
        lm[j] = clamp_int(nearest_int(15.0f / max_min * neg_min[j]), 0, 15);
    for (int j = 0; j < 16; ++j) y[b].scales[j] = static_cast<uint8_t>(ls[j] | (lm[j] << 4));
    y[b].d = fp32_to_fp16(max_scale > 0.0f ? max_scale / 15.0f : 0.0f);
    y[b].dmin = fp32_to_fp16(max_min > 0.0f ? max_min / 15.0f : 0.0f);
    const float d = fp16_to_fp32(y[b].d), dmin = fp16_to_fp32(y[b].dmin);
    for (int j = 0; j < 16; ++j) {
      const float sd = d * static_cast<float>(ls[j]);
      if (sd == 0.0f) continue;  // keep the fit's levels (they decode alike)
      const float dm = dmin * static_cast<float>(lm[j]);
      for (int i = 0; i < 16; ++i)
        q[16 * j + i] =
            static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + i] + dm) / sd), 0, 3));
    }
    pack_2bit(q, y[b].qs);
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  uint8_t q[QK_K];
  float scale[16];
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    const float max_scale = fit_sub_blocks(x, 4, true, scale, q);
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    int ls[16] = {};  // signed 6-bit codes, -32..31
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        ls[j] = clamp_int(nearest_int(iscale * scale[j]), -32, 31);
        const int biased = ls[j] + 32;
        if (j < 8)
          y[b].scales[j] = static_cast<uint8_t>(biased & 0x0f);
        else
          y[b].scales[j - 8] |= static_cast<uint8_t>((biased & 0x0f) << 4);
        y[b].scales[8 + j % 4] |= static_cast<uint8_t>((biased >> 4) << (2 * (j / 4)));
      }
      y[b].d = fp32_to_fp16(1.0f / iscale);
    } else {
      y[b].d = fp32_to_fp16(0.0f);
    }
    requantize_sub_blocks(x, fp16_to_fp32(y[b].d), ls, -4, q);
    // Level l + 4 in 0..7: the high bit (set for l >= 0) goes to hmask, the
    // low two bits to qs.
    std::memset(y[b].hmask, 0, sizeof(y[b].hmask));
    for (int i = 0; i < QK_K; ++i) {
      if (q[i] > 3) {
        y[b].hmask[i % 32] |= static_cast<uint8_t>(1u << (i / 32));
        q[i] = static_cast<uint8_t>(q[i] - 4);
      }
    }
    pack_2bit(q, y[b].qs);
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  const AffineSearch search{-1.0f, 0.1f, 20, false};
  uint8_t q[QK_K];
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    encode_affine_k(x, 15, search, &y[b].d, &y[b].dmin, y[b].scales, q);
    for (int chunk = 0; chunk < 4; ++chunk)
      for (int l = 0; l < 32; ++l)
        y[b].qs[32 * chunk + l] =
            static_cast<uint8_t>(q[64 * chunk + l] | (q[64 * chunk + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  const AffineSearch search{-0.5f, 0.1f, 15, false};
  uint8_t q[QK_K];
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    encode_affine_k(x, 31, search, &y[b].d, &y[b].dmin, y[b].scales, q);
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int chunk = 0; chunk < 4; ++chunk)
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * chunk + l], hi = q[64 * chunk + 32 + l];
        y[b].qs[32 * chunk + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        y[b].qh[l] |=
            static_cast<uint8_t>(((lo >> 4) << (2 * chunk)) | ((hi >> 4) << (2 * chunk + 1)));
      }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  uint8_t q[QK_K];
  float scale[16];
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    const float max_scale = fit_sub_blocks(x, 32, false, scale, q);
    if (std::fabs(max_scale) < kTinyGroupMax) {
      std::memset(&y[b], 0, sizeof(BlockQ6_K));
      continue;
    }
    // The largest sub-block scale maps to -128; d carries its sign.
    const float iscale = -128.0f / max_scale;
    y[b].d = fp32_to_fp16(1.0f / iscale);
    for (int j = 0; j < 16; ++j)
      y[b].scales[j] = static_cast<int8_t>(clamp_int(nearest_int(iscale * scale[j]), -128, 127));
    requantize_sub_blocks(x, fp16_to_fp32(y[b].d), y[b].scales, -32, q);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* s = q + 128 * half;
      uint8_t* ql = y[b].ql + 64 * half;
      uint8_t* qh = y[b].qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((s[l] & 0x0f) | ((s[l + 64] & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((s[l + 32] & 0x0f) | ((s[l + 96] & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((s[l] >> 4) | ((s[l + 32] >> 4) << 2) |
                                     ((s[l + 64] >> 4) << 4) | ((s[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace pagellm::detail
