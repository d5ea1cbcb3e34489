#include "backend/cpu/ops.h"

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include "backend/cpu/cpu_isa.h"

#include <algorithm>
#include <cmath>

namespace pagellm {

void rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    if (weight)
      for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * scale * weight[i];
    else  // an unweighted norm (Gemma 4's v)
      for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * scale;
  }
}

void add_inplace(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

namespace {
#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// As silu_mul_avx512, eight at a time; the tail through a padded copy so that
// it takes the same vector path.
void silu_mul_avx2(float* gate, const float* up, int64_t count) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const auto one8 = [&](const float* g8, const float* u8, float* out) {
    const __m256 g = _mm256_loadu_ps(g8);
    const __m256 e = cpu::simd::exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out,
                     _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(u8)));
  };
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) one8(gate + i, up + i, gate + i);
  if (i < count) {
    float g[8] = {}, u[8] = {}, o[8];
    for (int64_t j = i; j < count; ++j) g[j - i] = gate[j], u[j - i] = up[j];
    one8(g, u, o);
    for (int64_t j = i; j < count; ++j) gate[j] = o[j - i];
  }
}
PAGELLM_TARGET_END
#endif

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Every element takes the same vector path (masked at the end), so its value
// does not depend on where a caller splits the range.
void silu_mul_avx512(float* gate, const float* up, int64_t count) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = cpu::simd::exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i)));
  }
}
PAGELLM_TARGET_END
#endif
}  // namespace

void silu_mul(float* gate, const float* up, int64_t count) {
#if PAGELLM_HAVE_AVX512
  if (cpu::best_isa() == cpu::CpuIsa::Avx512) return silu_mul_avx512(gate, up, count);
#endif
#if PAGELLM_HAVE_AVX2
  if (cpu::best_isa() == cpu::CpuIsa::Avx2) return silu_mul_avx2(gate, up, count);
#endif
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh_mul(float* gate, const float* up, int64_t count) {
  // In double, then rounded: the reference formula, one value per input.
  constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)
  for (int64_t i = 0; i < count; ++i) {
    const double g = gate[i];
    gate[i] = static_cast<float>(0.5 * g * (1.0 + std::tanh(kC * (g + 0.044715 * g * g * g))) * up[i]);
  }
}

void glu(Activation act, float* gate, const float* up, int64_t count) {
  if (act == Activation::kSilu) return silu_mul(gate, up, count);
  if (act == Activation::kSigmoid) {
    for (int64_t i = 0; i < count; ++i) gate[i] = up[i] / (1.0f + std::exp(-gate[i]));
    return;
  }
  if (act == Activation::kSwigluClamped) {
    constexpr float kLimit = 7.0f, kAlpha = 1.702f;
    for (int64_t i = 0; i < count; ++i) {
      const float g = std::min(gate[i], kLimit), u = std::clamp(up[i], -kLimit, kLimit);
      gate[i] = g / (1.0f + std::exp(-kAlpha * g)) * (u + 1.0f);
    }
    return;
  }
  gelu_tanh_mul(gate, up, count);
}

void add_bias(float* x, const float* bias, int64_t rows, int64_t n, int64_t stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) x[r * stride + i] += bias[i];
}

void RopeCache::prepare(const int32_t* positions, int64_t n_tokens) {
  const int32_t half = n_rot_ / 2;
  cos_.resize(static_cast<size_t>(n_tokens * half));
  sin_.resize(static_cast<size_t>(n_tokens * half));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int32_t i = 0; i < half; ++i) {
      // Double precision: angles reach thousands of radians at long positions.
      double inv_freq = std::pow(static_cast<double>(freq_base_), -2.0 * i / n_rot_);
      if (!factors_.empty()) inv_freq /= factors_[static_cast<size_t>(i)];
      const double angle = static_cast<double>(positions[t]) * freq_scale_ * inv_freq;
      cos_[static_cast<size_t>(t * half + i)] = static_cast<float>(std::cos(angle) * attn_factor_);
      sin_[static_cast<size_t>(t * half + i)] = static_cast<float>(std::sin(angle) * attn_factor_);
    }
  }
}

void RopeCache::apply(float* x, int64_t n_tokens, int64_t stride, int32_t n_heads, int32_t head_dim,
                      RopeStyle style) const {
  const int32_t half = n_rot_ / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* c = cos_.data() + t * half;
    const float* s = sin_.data() + t * half;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* v = x + t * stride + static_cast<int64_t>(h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const int32_t i0 = style == RopeStyle::kNorm ? 2 * i : i;
        const int32_t i1 = style == RopeStyle::kNorm ? 2 * i + 1 : i + half;
        const float a = v[i0], b = v[i1];
        v[i0] = a * c[i] - b * s[i];
        v[i1] = a * s[i] + b * c[i];
      }
    }
  }
}

}  // namespace pagellm
