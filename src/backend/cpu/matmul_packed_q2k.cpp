// Rows16 Q2_K weights (packed_weights.h) times split Q8_K activation rows
// (activation_quant.h). Per weight row r, activation row c, super-block s:
//   S = sum_j scale_j * I_j      I_j = exact dot of sub-block j's codes (0..3)
//                                      and q_x
//   M = sum_j min_j * sum16_j    (sums of 16 activation codes)
//   acc = fma(float(S), d * d_x, acc); acc = fma(float(M), -(dmin * d_x), acc)
// super-blocks in order: the scalar, AVX2 and AVX-512 variants give the same
// bits. No AMX variant (packed_drive.h).
#include "backend/cpu/packed_drive.h"  // first: wraps <immintrin.h>

namespace pagellm::cpu::detail {

namespace {

constexpr size_t kQ2KScales = 1024, kQ2KD = 1280, kQ2KSuper = 1344;

void q2k_scalar(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x, size_t xs,
                int64_t cols, float* out, int64_t os) {
  scalar_k_frame<kQ2KSuper>(n, w, gb, rows, x, xs, cols, out, os,
                            [](const uint8_t* sb, const XRowK& xr, int64_t s, int lane, float acc) {
                              int32_t S = 0, M = 0;
                              for (int j = 0; j < 16; ++j) {
                                int32_t I = 0;
                                for (int e = 16 * j; e < 16 * j + 16; ++e) {
                                  const int G = e / 4, i = e % 4;
                                  I += ((sb[64 * (G % 16) + 4 * lane + i] >> (2 * (G / 16))) & 3) *
                                       xr.qs[256 * s + e];
                                }
                                const uint8_t sm = sb[kQ2KScales + 16 * j + lane];
                                S += (sm & 15) * I;
                                M += (sm >> 4) * xr.sum16[16 * s + j];
                              }
                              return add_scale_min_terms(sb + kQ2KD, lane, S, M, xr.d[s], acc);
                            });
}

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// Avx2K16's code policy: sub-block j = 4q + jq reads quarter q of the 2-bit plane.
// Codes <= 3: a sub-block's four maddubs pair sums fit in int16.
struct Q2KCodes {
  static constexpr size_t kSuper = kQ2KSuper;
  static constexpr int kRun = 4;

  static __attribute__((always_inline)) __m256i codes(const uint8_t* sb, int q, int jq, int t,
                                                      int h) {
    __m256i v = simd::load256(sb + 64 * (4 * jq + t) + 32 * h);
    if (q > 0) v = _mm256_srli_epi16(v, 2 * q);
    return _mm256_and_si256(v, _mm256_set1_epi8(3));
  }

  // The low nibbles of the file's scale bytes (the high ones are the mins).
  static __attribute__((always_inline)) __m256i scales(const uint8_t* sb, int j, int h) {
    const __m256i s32 = _mm256_and_si256(
        _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + kQ2KScales + 16 * j + 8 * h))),
        _mm256_set1_epi32(15));
    return _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
  }

  // acc += float(S) * d * d_x - float(M) * dmin * d_x, M = sum_j min_j * sum16_j.
  template <int CB>
  static __attribute__((always_inline)) void finish(const uint8_t* sb, int h, const XRowK (&xr)[CB],
                                                    int64_t s, const __m256i (&S)[CB],
                                                    __m256 (&acc)[CB]) {
    __m256i M[CB];
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) M[c] = _mm256_setzero_si256();
    add_sub_sums16<CB>(
        sb + kQ2KScales, h, xr, s,
        [](__m128i v) { return _mm256_srli_epi16(_mm256_cvtepu8_epi16(v), 4); }, M);
    const __m256 dv =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ2KD + 16 * h)));
    const __m256 dm = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ2KD + 32 + 16 * h)));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) {
      const __m256 dx = _mm256_set1_ps(xr[c].d[s]);
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[c]), _mm256_mul_ps(dv, dx), acc[c]);
      acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M[c]), _mm256_mul_ps(dm, dx), acc[c]);
    }
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Avx512K16's code policy: codes 0..3 from the 2-bit plane, the scale byte's low
// nibble; the mins' term in finish.
struct Q2KCodes512 {
  static constexpr size_t kSuper = kQ2KSuper;
  static constexpr int kOffset = 0;

  static __attribute__((always_inline)) __m512i codes(const uint8_t* sb, int G) {
    __m512i v = _mm512_loadu_si512(sb + 64 * (G % 16));
    if (G >= 16) v = _mm512_srli_epi16(v, 2 * (G / 16));
    return _mm512_and_si512(v, _mm512_set1_epi8(3));
  }

  static __attribute__((always_inline)) __m512i scales(const uint8_t* sb, int j) {
    return _mm512_and_si512(_mm512_cvtepu8_epi32(simd::load128(sb + kQ2KScales + 16 * j)),
                            _mm512_set1_epi32(15));
  }

  // acc = fma(float(S), d * d_x, acc), then fma(float(M), -(dmin * d_x), acc)
  // with M = sum_j min_j * sum16_j (two sub-blocks per vpdpwssd).
  template <int CB>
  static __attribute__((always_inline)) void finish(const uint8_t* sb, const XRowK (&xr)[CB],
                                                    int64_t s, const __m512i (&S)[CB],
                                                    __m512 (&acc)[CB]) {
    __m512i mp[8];  // (min_2p, min_2p+1) of each row as int16 pairs
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const __m512i a =
          _mm512_srli_epi32(_mm512_cvtepu8_epi32(simd::load128(sb + kQ2KScales + 32 * p)), 4);
      const __m512i b =
          _mm512_srli_epi32(_mm512_cvtepu8_epi32(simd::load128(sb + kQ2KScales + 32 * p + 16)), 4);
      mp[p] = _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
    }
    const __m512 dv = _mm512_cvtph_ps(simd::load256(sb + kQ2KD));
    const __m512 dm = _mm512_cvtph_ps(simd::load256(sb + kQ2KD + 32));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) {
      __m512i M = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p)
        M = _mm512_dpwssd_epi32(
            M, mp[p],
            _mm512_set1_epi32(static_cast<int32_t>(simd::load_u32(xr[c].sum16 + 16 * s + 2 * p))));
      const __m512 dx = _mm512_set1_ps(xr[c].d[s]);
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[c]), _mm512_mul_ps(dv, dx), acc[c]);
      acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(dm, dx), acc[c]);
    }
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

}  // namespace

PackedTileFn packed_q2k_fn(CpuIsa isa) {
  return pick_packed<void, void, PAGELLM_IF_AVX512(Super512<Avx512K16<Q2KCodes512>>),
                     PAGELLM_IF_AVX2(Super256<Avx2K16<Q2KCodes>>)>(isa, q2k_scalar);
}

}  // namespace pagellm::cpu::detail
