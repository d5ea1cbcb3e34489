// Float lanes for kernels written once and compiled per instruction set (the
// recurrent-state kernels: delta_rule_body.inc, ssm_conv_body.inc): a kernel
// body included in namespaces scalar, avx2 and avx512 finds `Lanes` there,
// a register of kWidth floats with the operations below. Every operation acts
// lane by lane with one rounding (fma: a * b + c rounded once), and exp is the
// same sequence of operations in every width, so a kernel that computes each
// output by the same operations in the same order gives the same bits in
// every variant. Internal to backend/cpu.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "backend/cpu/simd.h"

namespace pagellm::cpu::lanes {

// exp(x) for x <= 88: x = n ln2 + r, e^r by a degree-6 polynomial (relative
// error ~2e-7), times 2^n built in the exponent bits; x < -87.3 (and NaN)
// gives 0. simd::exp8 (AVX2), the AVX-512 rendition below and the CUDA kernels'
// (backend/cuda/delta_net.cu) make the same operations. Always inlined, so
// that in a variant's kernels its fused multiply-adds are instructions, not
// calls (a function of its own is compiled for the baseline CPU).
inline __attribute__((always_inline)) float exp_scalar(float x) {
  const bool normal = x >= -87.3f;
  x = std::min(std::max(x, -87.3f), 88.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(-n, 0.693359375f, x);
  r = std::fma(-n, -2.12194440e-4f, r);
  float p = 1.0f / 720;
  p = std::fma(p, r, 1.0f / 120);
  p = std::fma(p, r, 1.0f / 24);
  p = std::fma(p, r, 1.0f / 6);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const float e = std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  return normal ? p * e : 0.0f;
}

namespace scalar {
struct Lanes {
  using T = float;
  static constexpr int kWidth = 1;
  static constexpr int kTile = 4;  // registers per row in a kernel's tile
  static T load(const float* p) { return *p; }
  static void store(float* p, T v) { *p = v; }
  static T set1(float v) { return v; }
  static T fma(T a, T b, T c) { return std::fma(a, b, c); }
  static T mul(T a, T b) { return a * b; }
  static T add(T a, T b) { return a + b; }
  static T sub(T a, T b) { return a - b; }
  static T div(T a, T b) { return a / b; }
  static T max(T a, T b) { return a > b ? a : b; }  // as maxps: b when equal or unordered
  static T exp(T x) { return exp_scalar(x); }
};
}  // namespace scalar

}  // namespace pagellm::cpu::lanes

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
namespace pagellm::cpu::lanes::avx2 {
struct Lanes {
  using T = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kTile = 2;  // 16 ymm registers: 4 rows x 2 + loads
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T set1(float v) { return _mm256_set1_ps(v); }
  static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T div(T a, T b) { return _mm256_div_ps(a, b); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  // exp_scalar's operations, 8 lanes at once (softmax uses it too).
  static T exp(T x) { return simd::exp8(x); }
};
}  // namespace pagellm::cpu::lanes::avx2
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
namespace pagellm::cpu::lanes::avx512 {
struct Lanes {
  using T = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kTile = 4;  // 32 zmm registers: 4 rows x 4 + loads
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T set1(float v) { return _mm512_set1_ps(v); }
  static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T div(T a, T b) { return _mm512_div_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T exp(T x) {
    const __mmask16 normal = _mm512_cmp_ps_mask(x, set1(-87.3f), _CMP_GE_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, set1(-87.3f)), set1(88.0f));
    const T n = _mm512_roundscale_ps(_mm512_mul_ps(x, set1(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    T r = _mm512_fnmadd_ps(n, set1(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    T p = set1(1.0f / 720);
    p = fma(p, r, set1(1.0f / 120));
    p = fma(p, r, set1(1.0f / 24));
    p = fma(p, r, set1(1.0f / 6));
    p = fma(p, r, set1(0.5f));
    p = fma(p, r, set1(1.0f));
    p = fma(p, r, set1(1.0f));
    const __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(normal, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
  }
};
}  // namespace pagellm::cpu::lanes::avx512
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512
