// Rows16 F16 / BF16 weights (packed_weights.h: rows interleaved by 32-element
// chunks in quads) times f32 activation rows. Every output is
// computed exactly as vec_dot_float.cpp computes it from row-major weights
// (one accumulator of 16 / 8 lanes, fma over the elements in order,
// simd::hsum), so in each variant both layouts give the same bits.
#include "backend/cpu/packed_drive.h"  // first: wraps <immintrin.h>

#include <vector>

#include "backend/cpu/lanes.h"

namespace pagellm::cpu::detail {

namespace {

// Scalar: each row unpacked, then the row-major scalar tile.
template <DType T>
void float_rows16_scalar(int64_t n, const uint8_t* w, size_t, int64_t rows, const uint8_t* x,
                         size_t xs, int64_t cols, float* out, int64_t os) {
  const DotTileFn dot = scalar_dot_tile(T);
  std::vector<uint8_t> row(dtype_row_bytes(T, n));
  for (int64_t r = 0; r < rows; ++r) {
    unpack_row16(T, n, w, r, row.data());
    dot(n, row.data(), row.size(), 1, x, xs, cols, out + r, os);
  }
}

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
struct F16Lanes16 {
  static __m512 load(const uint8_t* p) { return _mm512_cvtph_ps(simd::load256(p)); }
};
struct BF16Lanes16 {
  static __m512 load(const uint8_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(simd::load256(p)), 16));
  }
};

namespace avx512 {
using Lanes = lanes::avx512::Lanes;
#include "backend/cpu/float_rows16_quad.inc"
}  // namespace avx512

template <class L>
struct FloatRows16Avx512 {
  static constexpr int kCols = 4;
  // One column with rows longer than this: the 4 quads at once (4 streams,
  // x read once per group rather than 4 times: it no longer stays in L1).
  // One thread, GEMV from DRAM, F16 vs the row-major layout: n_in 2048
  // quad by quad +12% (4 at once -12%), n_in 5632 4 at once +10% (quad by
  // quad +0%).
  static constexpr int64_t kQuadByQuadMaxN = 4096;

  // One column, QB quads at once (QB streams, x read once for them).
  template <int QB>
  static void quads1(int64_t n, const uint8_t* grp, int q0, const uint8_t* x, float* out,
                     int valid) {
    constexpr int RB = kFloatQuadRows * QB;
    __m512 acc[RB];
    for (int r = 0; r < RB; ++r) acc[r] = _mm512_setzero_ps();
    const int64_t nb = n / 32;
    const size_t quad_bytes = static_cast<size_t>(nb) * 64 * kFloatQuadRows;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* chunk = grp + float_rows16_at(kFloatQuadRows * q0, b, nb);
      for (int h = 0; h < 2; ++h) {
        const __m512 xv = _mm512_loadu_ps(reinterpret_cast<const float*>(x) + 32 * b + 16 * h);
        for (int r = 0; r < RB; ++r) {
          const __m512 wv = L::load(chunk + (r / kFloatQuadRows) * quad_bytes +
                                    64 * (r % kFloatQuadRows) + 32 * h);
          acc[r] = _mm512_fmadd_ps(wv, xv, acc[r]);
        }
      }
    }
    const int r0 = kFloatQuadRows * q0;
    for (int r = 0; r < RB && r0 + r < valid; ++r) out[r0 + r] = simd::hsum(acc[r]);
  }

  template <int CB>
  static void group(int64_t n, const uint8_t* grp, const uint8_t* x, size_t xs, float* out,
                    int64_t os, int valid) {
    if constexpr (CB == 1) {
      if (n > kQuadByQuadMaxN) return quads1<kPackRows / kFloatQuadRows>(n, grp, 0, x, out, valid);
    }
    for (int q = 0; kFloatQuadRows * q < valid; ++q)
      avx512::float_quad<L, CB>(n, grp, q, x, xs, out, os, valid);
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
struct F16Lanes8 {
  static __m256 load(const uint8_t* p) { return _mm256_cvtph_ps(simd::load128(p)); }
};
struct BF16Lanes8 {
  static __m256 load(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(simd::load128(p)), 16));
  }
};

namespace avx2 {
using Lanes = lanes::avx2::Lanes;
#include "backend/cpu/float_rows16_quad.inc"
}  // namespace avx2

template <class L>
struct FloatRows16Avx2 {
  static constexpr int kCols = 2;  // 16 ymm registers

  template <int CB>
  static void group(int64_t n, const uint8_t* grp, const uint8_t* x, size_t xs, float* out,
                    int64_t os, int valid) {
    for (int q = 0; kFloatQuadRows * q < valid; ++q)
      avx2::float_quad<L, CB>(n, grp, q, x, xs, out, os, valid);
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

}  // namespace

PackedTileFn packed_float_fn(DType wtype, CpuIsa isa) {
  if (wtype == DType::F16)
    return pick_packed<void, void, PAGELLM_IF_AVX512(FloatRows16Avx512<F16Lanes16>),
                       PAGELLM_IF_AVX2(FloatRows16Avx2<F16Lanes8>)>(
        isa, float_rows16_scalar<DType::F16>);
  if (wtype == DType::BF16)
    return pick_packed<void, void, PAGELLM_IF_AVX512(FloatRows16Avx512<BF16Lanes16>),
                       PAGELLM_IF_AVX2(FloatRows16Avx2<BF16Lanes8>)>(
        isa, float_rows16_scalar<DType::BF16>);
  return nullptr;
}

}  // namespace pagellm::cpu::detail
