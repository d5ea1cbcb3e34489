// Rows16 IQ4_XS weights (packed_weights.h) times split Q8_K activation rows
// (activation_quant.h). Per weight row r, activation row c, super-block s:
//   S = sum_j scale_j * I_j     I_j = exact dot of sub-block j's values
//                               (kIq4NlValues[code]) and q_x; scale_j = ls - 32
//   acc = fma(float(S), d * d_x, acc)
// super-blocks in order: the scalar, AVX2, AVX-512 VNNI and AMX variants give
// the same bits.
#include "backend/cpu/packed_s8_scaled.h"  // first: wraps <immintrin.h>

#include <cmath>

#include "tensor/blocks.h"

namespace pagellm::cpu::detail {

namespace {

// Offsets in a super-block's bytes (packed_weights.h).
constexpr size_t kIq4XsScales = 2048, kIq4XsD = 2176, kIq4XsSuper = 2208;

// The value of element e (0..255) of row `lane` in super-block bytes sb.
int iq4xs_value(const uint8_t* sb, int lane, int e) {
  const int j = e / 32, t = (e % 32) / 4, i = e % 4;
  const uint8_t v = sb[256 * j + 64 * (t % 4) + 4 * lane + i];
  return kIq4NlValues[t < 4 ? v & 15 : v >> 4];
}

void iq4xs_scalar(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x, size_t xs,
                  int64_t cols, float* out, int64_t os) {
  scalar_s8_scaled_frame<kIq4XsSuper, 8, kIq4XsScales, kIq4XsD>(
      n, w, gb, rows, x, xs, cols, out, os,
      [](const uint8_t* sb, const XRowK& xr, int64_t s, int lane, int j) {
        int32_t I = 0;
        for (int e = 32 * j; e < 32 * j + 32; ++e)
          I += iq4xs_value(sb, lane, e) * xr.qs[256 * s + e];
        return I;
      });
}

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// Both halves of a group in one pass, columns innermost. Per dword group the
// nibbles of 16 rows are looked up in the value table (one shuffle per 8 rows,
// iq4_values) and multiplied as signed values (add_signed_products), whose
// int16 pair sums (<= 2 * 127 * 127) meet the sub-block's scale pairs in one
// madd.
struct Avx2Iq4Xs {
  static constexpr int kCols = 3;
  static constexpr size_t kSuper = kIq4XsSuper;

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&xr)[CB],
                                                  int64_t s, __m256i (&S)[2][CB]) {
    for (int j = 0; j < 8; ++j) {
      if (j % 2 == 0) prefetch_quarter<kIq4XsSuper>(sb, j / 2);
      const __m256i sc[2] = {scale_pairs_s8(sb + kIq4XsScales + 16 * j),
                             scale_pairs_s8(sb + kIq4XsScales + 16 * j + 8)};
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) {
        const __m256i W[2] = {iq4_values(simd::load256(sb + 256 * j + 64 * (t % 4)), t),
                              iq4_values(simd::load256(sb + 256 * j + 64 * (t % 4) + 32), t)};
        add_signed_products<CB>(W, xr, static_cast<size_t>(256 * s + 32 * j + 4 * t), sc, S);
      }
    }
  }

  template <int CB>
  static __attribute__((always_inline)) void finish(const uint8_t* sb, int h, const XRowK (&xr)[CB],
                                                    int64_t s, const __m256i (&S)[CB],
                                                    __m256 (&acc)[CB]) {
    const __m256 dv =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kIq4XsD + 16 * h)));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c)
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[c]),
                               _mm256_mul_ps(dv, _mm256_set1_ps(xr[c].d[s])), acc[c]);
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// One zmm = 16 rows: per sub-block the nibbles' table values + 128 as
// unsigned codes through vpdpbusd, -128 * sum32_j(q_x) taken back, times the
// sub-block's scales in int32; the float work once per super-block.
struct Avx512Iq4Xs : RowScaleFinish<kIq4XsD> {
  static constexpr int kCols = 8;
  static constexpr size_t kSuper = kIq4XsSuper;

  // S[c] += scale_j * I_j for every column, from sub-block j's shifted codes A.
  template <int CB>
  static inline __attribute__((always_inline)) void add_scaled(const __m512i (&A)[8],
                                                               const uint8_t* sb, int j,
                                                               const XRowK (&xr)[CB], int64_t s,
                                                               __m512i (&S)[CB]) {
    const __m512i sc = _mm512_cvtepi8_epi32(simd::load128(sb + kIq4XsScales + 16 * j));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) {
      const int8_t* q = xr[c].qs + 256 * s + 32 * j;
      __m512i I = _mm512_set1_epi32(-128 * xr[c].sum32[8 * s + j]), J = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < 8; k += 2) {
        I = simd::dpbusd_bcast(I, A[k], q + 4 * k);
        J = simd::dpbusd_bcast(J, A[k + 1], q + 4 * k + 4);
      }
      S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(_mm512_add_epi32(I, J), sc));
    }
  }

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&xr)[CB],
                                                  int64_t s, const uint8_t*, size_t, bool hint,
                                                  __m512i (&S)[CB]) {
    for (int j = 0; j < 8; ++j) {
      if (hint && j % 2 == 0) prefetch_quarter<kIq4XsSuper>(sb, j / 2);
      __m512i A[8];
      nibble_groups(sb + 256 * j, A);
      iq4_shifted_values(A);
      add_scaled<CB>(A, sb, j, xr, s, S);
    }
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

#if PAGELLM_HAVE_AMX
PAGELLM_TARGET_AMX
// AMX (packed_s8_scaled.h's AmxS8Pairs): B = the 16 rows' table values
// (signed) of sub-blocks j and j + 1; the rest is Avx512Iq4Xs's on the same
// integers.
struct Iq4XsPairCodes {
  static __attribute__((always_inline)) void pair(const uint8_t* sb, int j,
                                                  uint8_t (&codes)[2][512]) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i A[8];
      nibble_groups(sb + 256 * (j + h), A);
      iq4_signed_values(A);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) _mm512_store_si512(codes[h] + 64 * k, A[k]);
    }
  }
};
template <class Tiles>
using AmxIq4Xs = AmxS8Pairs<Avx512Iq4Xs, Tiles, Iq4XsPairCodes, 8, 32, kIq4XsScales>;
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AMX

}  // namespace

PackedTileFn packed_iq4xs_amx_fn(bool emulated) {
  return pick_amx<PAGELLM_IF_AMX(AmxSuper<AmxIq4Xs<EmuTiles>>),
                  PAGELLM_IF_AMX(AmxSuper<AmxIq4Xs<HwTiles>>)>(emulated);
}

PackedTileFn packed_iq4xs_fn(CpuIsa isa) {
  return pick_packed<PAGELLM_IF_AMX(AmxSuper<AmxIq4Xs<EmuTiles>>),
                     PAGELLM_IF_AMX(AmxSuper<AmxIq4Xs<HwTiles>>),
                     PAGELLM_IF_AVX512(Super512<Avx512Iq4Xs>),
                     PAGELLM_IF_AVX2(Super256<Avx2Iq4Xs>)>(isa, iq4xs_scalar);
}

}  // namespace pagellm::cpu::detail
