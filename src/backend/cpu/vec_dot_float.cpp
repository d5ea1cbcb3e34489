// F32 / F16 / BF16 weight rows times f32 activation rows, AVX2 and AVX-512.
// Each output keeps one vector accumulator (8 or 16 lanes): for every chunk of
// 8/16 elements in order, acc = fma(w, x, acc); a short tail is zero-padded into
// one last chunk; the lanes are then summed in a fixed order (simd::hsum).
#include <cstring>

#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/simd.h"

namespace pagellm::cpu::detail {

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
namespace {

// ---- AVX2: 8 lanes ---------------------------------------------------------------

struct F32x8 {
  static constexpr int kBytes = 4;
  static __m256 load(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
};
struct F16x8 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* p) { return _mm256_cvtph_ps(simd::load128(p)); }
};
struct BF16x8 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(simd::load128(p)), 16));
  }
};

template <class L>
struct FloatKernAvx2 {
  static constexpr int kRows = 4, kCols = 2, kGemvRows = 4;  // 16 ymm registers

  template <int RB, int CB>
  static void micro(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out,
                    int64_t os) {
    __m256 acc[RB][CB];
    for (int r = 0; r < RB; ++r)
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 xv[CB];
      for (int c = 0; c < CB; ++c)
        xv[c] = _mm256_loadu_ps(reinterpret_cast<const float*>(x + c * xs) + i);
      for (int r = 0; r < RB; ++r) {
        simd::prefetch(w + (r + simd::kPrefetchGroups * RB) * ws + i * L::kBytes);
        __m256 wv = L::load(w + r * ws + i * L::kBytes);
        for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
      }
    }
    if (i < n) {
      const size_t left = static_cast<size_t>(n - i);
      __m256 xv[CB];
      for (int c = 0; c < CB; ++c) {
        alignas(32) float t[8] = {};
        std::memcpy(t, reinterpret_cast<const float*>(x + c * xs) + i, left * 4);
        xv[c] = _mm256_load_ps(t);
      }
      for (int r = 0; r < RB; ++r) {
        alignas(32) uint8_t t[32] = {};
        std::memcpy(t, w + r * ws + i * L::kBytes, left * L::kBytes);
        __m256 wv = L::load(t);
        for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int c = 0; c < CB; ++c) out[c * os + r] = simd::hsum(acc[r][c]);
  }
};

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// ---- AVX-512: 16 lanes -------------------------------------------------------------

struct F32x16 {
  static constexpr int kBytes = 4;
  static __m512 load(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const uint8_t* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16x16 {
  static constexpr int kBytes = 2;
  static __m512 load(const uint8_t* p) { return _mm512_cvtph_ps(simd::load256(p)); }
  static __m512 load(const uint8_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};
struct BF16x16 {
  static constexpr int kBytes = 2;
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const uint8_t* p) { return widen(simd::load256(p)); }
  static __m512 load(const uint8_t* p, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, p));
  }
};

template <class L>
struct FloatKernAvx512 {
  static constexpr int kRows = 8, kCols = 3, kGemvRows = 4;

  template <int RB, int CB>
  static void micro(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out,
                    int64_t os) {
    __m512 acc[RB][CB];
    for (int r = 0; r < RB; ++r)
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      __m512 xv[CB];
      for (int c = 0; c < CB; ++c)
        xv[c] = _mm512_loadu_ps(reinterpret_cast<const float*>(x + c * xs) + i);
      for (int r = 0; r < RB; ++r) {
        simd::prefetch(w + (r + simd::kPrefetchGroups * RB) * ws + i * L::kBytes);
        __m512 wv = L::load(w + r * ws + i * L::kBytes);
        for (int c = 0; c < CB; ++c) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
      }
    }
    if (i < n) {
      const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
      __m512 xv[CB];
      for (int c = 0; c < CB; ++c)
        xv[c] = _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(x + c * xs) + i);
      for (int r = 0; r < RB; ++r) {
        __m512 wv = L::load(w + r * ws + i * L::kBytes, m);
        for (int c = 0; c < CB; ++c) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int c = 0; c < CB; ++c) out[c * os + r] = simd::hsum(acc[r][c]);
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

}  // namespace
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

DotTileFn float_dot_tile(DType wtype, CpuIsa isa) {
#if PAGELLM_HAVE_AVX512
  if (isa == CpuIsa::Avx512) {
    switch (wtype) {
      case DType::F32:
        return run_tile<FloatKernAvx512<F32x16>>;
      case DType::F16:
        return run_tile<FloatKernAvx512<F16x16>>;
      case DType::BF16:
        return run_tile<FloatKernAvx512<BF16x16>>;
      default:
        return nullptr;
    }
  }
#endif
#if PAGELLM_HAVE_AVX2
  if (isa == CpuIsa::Avx2) {
    switch (wtype) {
      case DType::F32:
        return run_tile<FloatKernAvx2<F32x8>>;
      case DType::F16:
        return run_tile<FloatKernAvx2<F16x8>>;
      case DType::BF16:
        return run_tile<FloatKernAvx2<BF16x8>>;
      default:
        return nullptr;
    }
  }
#endif
  (void)wtype;
  (void)isa;
  return nullptr;
}

}  // namespace pagellm::cpu::detail
