// Rows16 Q3_K weights (packed_weights.h) times split Q8_K activation rows
// (activation_quant.h). Per weight row r, activation row c, super-block s:
//   S = sum_j scale_j * I_j      I_j = exact dot of sub-block j's codes (0..7)
//                                      and q_x
//   O = sum_j scale_j * sum16_j  (sums of 16 activation codes)
//   acc = fma(float(S - 4 * O), d * d_x, acc)
// super-blocks in order: the scalar, AVX2 and AVX-512 variants give the same
// bits (S - 4 * O is the same integer whether the offset is taken per
// sub-block or at the end). No AMX variant (packed_drive.h).
#include "backend/cpu/packed_drive.h"  // first: wraps <immintrin.h>

#include <cmath>

namespace pagellm::cpu::detail {

namespace {

constexpr size_t kQ3KHigh = 1024, kQ3KScales = 1536, kQ3KD = 1792, kQ3KSuper = 1824;

void q3k_scalar(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x, size_t xs,
                int64_t cols, float* out, int64_t os) {
  scalar_k_frame<kQ3KSuper>(
      n, w, gb, rows, x, xs, cols, out, os,
      [](const uint8_t* sb, const XRowK& xr, int64_t s, int lane, float acc) {
        int32_t S = 0, O = 0;
        for (int j = 0; j < 16; ++j) {
          int32_t I = 0;
          for (int e = 16 * j; e < 16 * j + 16; ++e) {
            const int G = e / 4, i = e % 4;
            const int lo = (sb[64 * (G % 16) + 4 * lane + i] >> (2 * (G / 16))) & 3;
            const int hi = (sb[kQ3KHigh + 64 * (G % 8) + 4 * lane + i] >> (G / 8)) & 1;
            I += (lo | (hi << 2)) * xr.qs[256 * s + e];
          }
          const int scale = static_cast<int8_t>(sb[kQ3KScales + 16 * j + lane]);
          S += scale * I;
          O += scale * xr.sum16[16 * s + j];
        }
        return std::fma(static_cast<float>(S - 4 * O), lane_f16(sb + kQ3KD, lane) * xr.d[s], acc);
      });
}

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// Avx2K16's code policy: sub-block j = 4q + jq reads quarter q of the 2-bit plane
// and eighth 2q + jq / 2 of the high bits. Codes <= 7: a sub-block's four
// maddubs pair sums fit in int16 (4 * 2 * 7 * 128 = 7168). acc += float(S -
// 4 * O) * d * d_x, O = sum_j scale_j * sum16_j (OffsetCodesS8).
struct Q3KCodes : OffsetCodesS8<kQ3KScales, kQ3KD, 2> {
  static constexpr size_t kSuper = kQ3KSuper;
  static constexpr int kRun = 4;

  static __attribute__((always_inline)) __m256i codes(const uint8_t* sb, int q, int jq, int t,
                                                      int h) {
    const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (2 * q + jq / 2)));
    __m256i lo = simd::load256(sb + 64 * (4 * jq + t) + 32 * h);
    if (q > 0) lo = _mm256_srli_epi16(lo, 2 * q);
    const __m256i hv =
        _mm256_and_si256(simd::load256(sb + kQ3KHigh + 64 * (4 * (jq % 2) + t) + 32 * h), bit);
    return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi8(3)),
                           _mm256_and_si256(_mm256_cmpeq_epi8(hv, bit), _mm256_set1_epi8(4)));
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Avx512K16's code policy: code = low 2 bits | 4 * high bit (0..7), offset 4.
// finish: acc = fma(float(S), d * d_x, acc) (S already holds -4 * O).
struct Q3KCodes512 : RowScaleFinish<kQ3KD> {
  static constexpr size_t kSuper = kQ3KSuper;
  static constexpr int kOffset = 4;

  static __attribute__((always_inline)) __m512i codes(const uint8_t* sb, int G) {
    __m512i lo = _mm512_loadu_si512(sb + 64 * (G % 16));
    if (G >= 16) lo = _mm512_srli_epi16(lo, 2 * (G / 16));
    lo = _mm512_and_si512(lo, _mm512_set1_epi8(3));
    const __mmask64 hi = _mm512_test_epi8_mask(_mm512_loadu_si512(sb + kQ3KHigh + 64 * (G % 8)),
                                               _mm512_set1_epi8(static_cast<char>(1 << (G / 8))));
    return _mm512_mask_add_epi8(lo, hi, lo, _mm512_set1_epi8(4));
  }

  static __attribute__((always_inline)) __m512i scales(const uint8_t* sb, int j) {
    return _mm512_cvtepi8_epi32(simd::load128(sb + kQ3KScales + 16 * j));
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

}  // namespace

PackedTileFn packed_q3k_fn(CpuIsa isa) {
  return pick_packed<void, void, PAGELLM_IF_AVX512(Super512<Avx512K16<Q3KCodes512>>),
                     PAGELLM_IF_AVX2(Super256<Avx2K16<Q3KCodes>>)>(isa, q3k_scalar);
}

}  // namespace pagellm::cpu::detail
