// Rows16 Q4_K, Q5_K and Q6_K weights (packed_weights.h) times split Q8_K activation
// rows (activation_quant.h). Their integer sub-scales are applied in int32, so
// the float work is two (Q4_K, Q5_K) or one (Q6_K) fma per output per 256-element
// super-block; each output is one float chain over the super-blocks in order,
// the same in the scalar, AVX2 and AVX-512 variants (bit for bit).
#include "backend/cpu/packed_s8_scaled.h"  // first: wraps <immintrin.h>

#include <cmath>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/fp16.h"

namespace pagellm::cpu::detail {

namespace {

// ---- Q4_K and Q5_K (Rows16, packed_weights.h) times split Q8_K rows -----------
// (kQ5: codes gain Q5_K's fifth bit, code = nibble + 16 * bit; all else alike.)
// Per weight row r, activation row c, super-block s:
//   S = sum_j scale_j * I_j      I_j = exact dot of sub-block j's codes and q_x
//   M = sum_j min_j * sum32_j    (sums of 32 activation codes)
//   acc = fma(float(S), d * d_x, acc); acc = fma(float(M), -(dmin * d_x), acc)
// super-blocks in order; every variant computes exactly this.

// Q5_K: the 512 bytes of fifth bits come first, then Q4_K's layout.
constexpr size_t kQ4KSuper = 2368, kQ4KScales = 2048, kQ4KMins = 2176, kQ4KD = 2304,
                 kQ5KPlane = 512, kQ5KSuper = 2880;
template <bool kQ5>
constexpr size_t kK4Super = kQ5 ? kQ5KSuper : kQ4KSuper;

template <bool kQ5>
void q4k_scalar(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x, size_t xs,
                int64_t cols, float* out, int64_t os) {
  scalar_k_frame<kK4Super<kQ5>>(
      n, w, gb, rows, x, xs, cols, out, os,
      [](const uint8_t* sb, const XRowK& xr, int64_t s, int lane, float acc) {
        const uint8_t* hb = sb;  // Q5_K's fifth bits
        if constexpr (kQ5) sb += kQ5KPlane;
        const uint8_t* mins = sb + kQ4KMins;
        int32_t S = 0, M = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t I = 0;
          for (int k = 0; k < 8; ++k)
            for (int i = 0; i < 4; ++i) {
              const uint8_t v = sb[512 * (j / 2) + 64 * k + 4 * lane + i];
              int code = j % 2 ? v >> 4 : v & 15;
              if constexpr (kQ5) code |= ((hb[64 * k + 4 * lane + i] >> j) & 1) << 4;
              I += code * xr.qs[256 * s + 32 * j + 4 * k + i];
            }
          S += sb[kQ4KScales + 16 * j + lane] * I;
          M += mins[2 * (16 * (j / 2) + lane) + j % 2] * xr.sum32[8 * s + j];
        }
        return add_scale_min_terms(sb + kQ4KD, lane, S, M, xr.d[s], acc);
      });
}

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Super512's policy (and AmxK4's finish).
template <bool kQ5>
struct Avx512K4 {
  // Q5_K's fifth-bit unpacking is worth spreading over 16 columns (c16
  // decode and prefill +11-13%); Q4_K gains nothing from it.
  static constexpr int kCols = kQ5 ? 16 : 8;
  static constexpr size_t kSuper = kK4Super<kQ5>;

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&xr)[CB],
                                                  int64_t s, const uint8_t*, size_t, bool hint,
                                                  __m512i (&S)[CB]) {
    const __m512i m4 = _mm512_set1_epi8(15);
    // Wide tiles hint the whole super-block at once, one-column ones a
    // quarter at a time (a burst of 37-45 lines stalls a GEMV).
    if constexpr (CB >= kPrefetchMinCols)
      for (size_t l = 0; l < kSuper; l += 64) simd::prefetch(sb + kPrefetchBytes + l);
    const uint8_t* hinted = sb;
    const uint8_t* hb = sb;  // Q5_K's fifth bits
    if constexpr (kQ5) sb += kQ5KPlane;
    for (int j = 0; j < 8; ++j) {
      if (CB < kPrefetchMinCols && hint && j % 2 == 0) prefetch_quarter<kSuper>(hinted, j / 2);
      __m512i A[8];
#pragma GCC unroll 16
      for (int k = 0; k < 8; ++k) {
        const __m512i v = _mm512_loadu_si512(sb + 512 * (j / 2) + 64 * k);
        A[k] = _mm512_and_si512(j % 2 ? _mm512_srli_epi16(v, 4) : v, m4);
        if constexpr (kQ5) {
          const __mmask64 hi = _mm512_test_epi8_mask(_mm512_loadu_si512(hb + 64 * k),
                                                     _mm512_set1_epi8(static_cast<char>(1 << j)));
          A[k] = _mm512_mask_add_epi8(A[k], hi, A[k], _mm512_set1_epi8(16));
        }
      }
      const __m512i sc = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ4KScales + 16 * j)));
#pragma GCC unroll 16
      for (int c = 0; c < CB; ++c) {
        const int8_t* q = xr[c].qs + 256 * s + 32 * j;
        __m512i I = _mm512_setzero_si512(), J = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int k = 0; k < 8; k += 2) {
          I = simd::dpbusd_bcast(I, A[k], q + 4 * k);
          J = simd::dpbusd_bcast(J, A[k + 1], q + 4 * k + 4);
        }
        S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(_mm512_add_epi32(I, J), sc));
      }
    }
  }

  // acc = fma(float(S), d * d_x, acc), then fnma(float(M), dmin * d_x, acc)
  // with M = sum_j min_j * sum32_j (two sub-blocks per vpdpwssd).
  template <int CB>
  static __attribute__((always_inline)) void finish(const uint8_t* sb, const XRowK (&xr)[CB],
                                                    int64_t s, const __m512i (&S)[CB],
                                                    __m512 (&acc)[CB]) {
    if constexpr (kQ5) sb += kQ5KPlane;
    __m512i mp[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) mp[p] = _mm512_cvtepu8_epi16(simd::load256(sb + kQ4KMins + 32 * p));
    const __m512 dv = _mm512_cvtph_ps(simd::load256(sb + kQ4KD));
    const __m512 dm = _mm512_cvtph_ps(simd::load256(sb + kQ4KD + 32));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) {
      const int16_t* sums32 = xr[c].sum32 + 8 * s;
      __m512i M = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p)
        M = _mm512_dpwssd_epi32(
            M, mp[p], _mm512_set1_epi32(static_cast<int32_t>(simd::load_u32(sums32 + 2 * p))));
      const __m512 dx = _mm512_set1_ps(xr[c].d[s]);
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[c]), _mm512_mul_ps(dv, dx), acc[c]);
      acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(dm, dx), acc[c]);
    }
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

#if PAGELLM_HAVE_AMX
PAGELLM_TARGET_AMX
// AMX (packed_drive.h's pair tiles): sub-blocks j and j + 1 of a super-block
// at once, A = the columns' 32 activation codes of each, B = the codes of the
// 16 rows spread to bytes (chunk j / 2's low and high nibbles, plus Q5_K's
// fifth bit), C = the exact I_j of every (column, row). The rest is
// Avx512K4's, on the same integers (S sums the same products, in int32).
template <bool kQ5, class TilesT>
struct AmxK4 : Avx512K4<kQ5> {
  using Tiles = TilesT;
  using Vnni = Super512<Avx512K4<kQ5>>;
  static constexpr int kKBytes = 32;

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&)[CB],
                                                  int64_t s, const uint8_t* x, size_t xs, bool,
                                                  __m512i (&S)[CB]) {
    const __m512i m4 = _mm512_set1_epi8(15);
    alignas(64) uint8_t codes[2][512];
    alignas(64) int32_t dots[2][16][16];
    for (size_t l = 0; l < kK4Super<kQ5>; l += 64) simd::prefetch(sb + kPrefetchBytes + l);
    const uint8_t* hb = sb;  // Q5_K's fifth bits
    if constexpr (kQ5) sb += kQ5KPlane;
    for (int j = 0; j < 8; j += 2) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m512i v = _mm512_loadu_si512(sb + 256 * j + 64 * k);
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (kQ5) {
          const __m512i h = _mm512_loadu_si512(hb + 64 * k);
          const __m512i sixteen = _mm512_set1_epi8(16);
          lo = _mm512_mask_add_epi8(
              lo, _mm512_test_epi8_mask(h, _mm512_set1_epi8(static_cast<char>(1 << j))), lo,
              sixteen);
          hi = _mm512_mask_add_epi8(
              hi, _mm512_test_epi8_mask(h, _mm512_set1_epi8(static_cast<char>(2 << j))), hi,
              sixteen);
        }
        _mm512_store_si512(codes[0] + 64 * k, lo);
        _mm512_store_si512(codes[1] + 64 * k, hi);
      }
      const uint8_t* q = x + 256 * s + 32 * j;
      pair_products<Tiles>(q, q + 32, xs, codes[0], codes[1], dots);
      const __m512i sc0 = _mm512_cvtepu8_epi32(simd::load128(sb + kQ4KScales + 16 * j));
      const __m512i sc1 = _mm512_cvtepu8_epi32(simd::load128(sb + kQ4KScales + 16 * j + 16));
#pragma GCC unroll 16
      for (int c = 0; c < CB; ++c) {
        S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(_mm512_load_si512(dots[0][c]), sc0));
        S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(_mm512_load_si512(dots[1][c]), sc1));
      }
    }
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AMX

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// One ymm = 8 rows; both halves of a group in one pass, dword group k
// outermost and columns innermost, as the Q4_0 AVX2 kernel (matmul_packed.cpp).
// A sub-block's int16 pair sums P meet its scales in one madd (P * scale pairs
// = scale * (P + P'), exact), so no 32-bit multiply.
template <bool kQ5>
struct Avx2K4 {
  static constexpr int kCols = 4;
  static constexpr size_t kSuper = kK4Super<kQ5>;

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&xr)[CB],
                                                  int64_t s, __m256i (&S)[2][CB]) {
    const __m256i m4 = _mm256_set1_epi8(15);
    const uint8_t* hb = sb;  // Q5_K's fifth bits
    if constexpr (kQ5) sb += kQ5KPlane;
    // Sub-block j's scales of the 8 rows of each half as int16 pairs.
    const auto scales = [&](int j, __m256i(&sc)[2]) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i s32 = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + kQ4KScales + 16 * j + 8 * h)));
        sc[h] = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
      }
    };
    // Sub-blocks 2i and 2i + 1 share their code bytes (low and high
    // nibbles); narrow tiles have the registers to take both per load.
    constexpr bool kPairs = CB <= (kQ5 ? 1 : 2);
    for (int i = 0; i < 4; ++i) {
      prefetch_quarter<kK4Super<kQ5>>(hb, i);
      if constexpr (kPairs) {
        __m256i sc[2][2];
        scales(2 * i, sc[0]);
        scales(2 * i + 1, sc[1]);
        constexpr int kRun = kQ5 ? 4 : 8;
#pragma GCC unroll 2
        for (int k0 = 0; k0 < 8; k0 += kRun) {
          __m256i P[2][2][CB];
#pragma GCC unroll 16
          for (int c = 0; c < CB; ++c)
            P[0][0][c] = P[0][1][c] = P[1][0][c] = P[1][1][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int k = k0; k < k0 + kRun; ++k) {
            __m256i A[2][2];
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
              const __m256i v = simd::load256(sb + 512 * i + 64 * k + 32 * h);
              A[0][h] = _mm256_and_si256(v, m4);
              A[1][h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
              if constexpr (kQ5) {
                const __m256i hv = simd::load256(hb + 64 * k + 32 * h);
#pragma GCC unroll 2
                for (int jj = 0; jj < 2; ++jj) {
                  const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (2 * i + jj)));
                  A[jj][h] = _mm256_or_si256(
                      A[jj][h],
                      _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hv, bit), bit),
                                       _mm256_set1_epi8(16)));
                }
              }
            }
#pragma GCC unroll 2
            for (int jj = 0; jj < 2; ++jj)
              add_pair_sums<CB>(A[jj], xr,
                                static_cast<size_t>(256 * s + 32 * (2 * i + jj) + 4 * k), P[jj]);
          }
          add_scaled_sums<CB>(P[0], sc[0], S);
          add_scaled_sums<CB>(P[1], sc[1], S);
        }
        continue;
      }
#pragma GCC unroll 2
      for (int jj = 0; jj < 2; ++jj) {
        const int j = 2 * i + jj;
        __m256i sc[2];
        scales(j, sc);
        // maddubs pair sums (2 * code * 127 at most) add up in int16 while
        // they fit: all eight for Q4_K (codes <= 15: 30480), four at a time
        // for Q5_K (<= 31: 31496).
        constexpr int kRun = kQ5 ? 4 : 8;
#pragma GCC unroll 2
        for (int k0 = 0; k0 < 8; k0 += kRun) {
          __m256i P[2][CB];
#pragma GCC unroll 16
          for (int c = 0; c < CB; ++c) P[0][c] = P[1][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int k = k0; k < k0 + kRun; ++k) {
            __m256i A[2];
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
              const __m256i v = simd::load256(sb + 512 * i + 64 * k + 32 * h);
              A[h] = _mm256_and_si256(jj ? _mm256_srli_epi16(v, 4) : v, m4);
              if constexpr (kQ5) {
                const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << j));
                const __m256i hv = _mm256_and_si256(simd::load256(hb + 64 * k + 32 * h), bit);
                A[h] = _mm256_or_si256(
                    A[h], _mm256_and_si256(_mm256_cmpeq_epi8(hv, bit), _mm256_set1_epi8(16)));
              }
            }
            add_pair_sums<CB>(A, xr, static_cast<size_t>(256 * s + 32 * j + 4 * k), P);
          }
          add_scaled_sums<CB>(P, sc, S);
        }
      }
    }
  }

  // Half h: acc += float(S) * d * d_x - float(M) * dmin * d_x, M = sum_j
  // min_j * sum32_j.
  template <int CB>
  static __attribute__((always_inline)) void finish(const uint8_t* sb, int h, const XRowK (&xr)[CB],
                                                    int64_t s, const __m256i (&S)[CB],
                                                    __m256 (&acc)[CB]) {
    if constexpr (kQ5) sb += kQ5KPlane;
    __m256i mp[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p)
      mp[p] = _mm256_cvtepu8_epi16(simd::load128(sb + kQ4KMins + 32 * p + 16 * h));
    const __m256 dv =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ4KD + 16 * h)));
    const __m256 dm = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ4KD + 32 + 16 * h)));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) {
      const int16_t* sums32 = xr[c].sum32 + 8 * s;
      __m256i M = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p)
        M = _mm256_add_epi32(M, _mm256_madd_epi16(mp[p], _mm256_set1_epi32(static_cast<int32_t>(
                                                             simd::load_u32(sums32 + 2 * p)))));
      const __m256 dx = _mm256_set1_ps(xr[c].d[s]);
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[c]), _mm256_mul_ps(dv, dx), acc[c]);
      acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M), _mm256_mul_ps(dm, dx), acc[c]);
    }
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

template <bool kQ5>
PackedTileFn k4_for(CpuIsa isa) {
  return pick_packed<PAGELLM_IF_AMX(AmxSuper<AmxK4<kQ5, EmuTiles>>),
                     PAGELLM_IF_AMX(AmxSuper<AmxK4<kQ5, HwTiles>>),
                     PAGELLM_IF_AVX512(Super512<Avx512K4<kQ5>>),
                     PAGELLM_IF_AVX2(Super256<Avx2K4<kQ5>>)>(isa, q4k_scalar<kQ5>);
}

// ---- Q6_K (Rows16) times split Q8_K rows -------------------------------------
// Per weight row r, activation row c, super-block s, with I_j the exact dot of
// sub-block j's codes (0..63) and q_x:
//   S = sum_j scale_j * (I_j - 32 * sum16_j);  acc = fma(float(S), d * d_x, acc)
constexpr size_t kQ6KSuper = 3360, kQ6KQh = 2048, kQ6KScales = 3072, kQ6KD = 3328;

void q6k_scalar(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x, size_t xs,
                int64_t cols, float* out, int64_t os) {
  scalar_s8_scaled_frame<kQ6KSuper, 16, kQ6KScales, kQ6KD>(
      n, w, gb, rows, x, xs, cols, out, os,
      [](const uint8_t* sb, const XRowK& xr, int64_t s, int lane, int j) {
        int32_t I = -32 * xr.sum16[16 * s + j];
        for (int e = 16 * j; e < 16 * j + 16; ++e) {
          const int G = e / 4, i = e % 4;
          const int lo = (sb[64 * (G % 32) + 4 * lane + i] >> (4 * (G / 32))) & 15;
          const int hi = (sb[kQ6KQh + 64 * (G % 16) + 4 * lane + i] >> (2 * (G / 16))) & 3;
          I += (lo | (hi << 4)) * xr.qs[256 * s + e];
        }
        return I;
      });
}

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Super512's policy (and AmxQ6K's finish).
struct Avx512Q6K : RowScaleFinish<kQ6KD> {
  static constexpr int kCols = 8;
  static constexpr size_t kSuper = kQ6KSuper;

  // Code group G (0..63) of the 16 rows: 4 codes (0..63) a row, from its
  // nibble plane (G % 32, high nibbles from 32 on) and 2-bit plane (G % 16,
  // field G / 16).
  static __attribute__((always_inline)) __m512i codes(const uint8_t* sb, int G) {
    __m512i lo = _mm512_loadu_si512(sb + 64 * (G % 32));
    if (G >= 32) lo = _mm512_srli_epi16(lo, 4);
    __m512i hi = _mm512_loadu_si512(sb + kQ6KQh + 64 * (G % 16));
    hi = _mm512_and_si512(_mm512_srli_epi16(hi, 2 * (G / 16)), _mm512_set1_epi8(3));
    return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi8(15)), _mm512_slli_epi16(hi, 4));
  }

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&xr)[CB],
                                                  int64_t s, const uint8_t*, size_t, bool hint,
                                                  __m512i (&S)[CB]) {
    if constexpr (CB >= kPrefetchMinCols)
      for (size_t l = 0; l < kQ6KSuper; l += 64) simd::prefetch(sb + kPrefetchBytes + l);
    for (int j = 0; j < 16; ++j) {
      if (CB < kPrefetchMinCols && hint && j % 4 == 0) prefetch_quarter<kQ6KSuper>(sb, j / 4);
      __m512i A[4];
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) A[t] = codes(sb, 4 * j + t);
      const __m512i sc = _mm512_cvtepi8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ6KScales + 16 * j)));
#pragma GCC unroll 8
      for (int c = 0; c < CB; ++c) {
        const int8_t* q = xr[c].qs + 256 * s + 16 * j;
        __m512i I = _mm512_set1_epi32(-32 * xr[c].sum16[16 * s + j]);
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) I = simd::dpbusd_bcast(I, A[t], q + 4 * t);
        S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(I, sc));
      }
    }
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

#if PAGELLM_HAVE_AMX
PAGELLM_TARGET_AMX
// AMX (packed_s8_scaled.h's AmxS8Pairs, tiles of 16-byte rows): B =
// Avx512Q6K's codes of sub-blocks j and j + 1 less 32 (signed: no offset
// term), C = the exact sums with the offset in them; the scale and float work
// is Avx512Q6K's on the same integers.
struct Q6KPairCodes {
  static __attribute__((always_inline)) void pair(const uint8_t* sb, int j,
                                                  uint8_t (&codes)[2][256]) {
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t)
      _mm512_store_si512(codes[t / 4] + 64 * (t % 4),
                         _mm512_sub_epi8(Avx512Q6K::codes(sb, 4 * j + t), _mm512_set1_epi8(32)));
  }
};
template <class Tiles>
using AmxQ6K = AmxS8Pairs<Avx512Q6K, Tiles, Q6KPairCodes, 16, 16, kQ6KScales>;
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AMX

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// Avx2K16's policy: sub-block j = 4q + jq's code groups G = 4j + t lie in
// quarter q (G / 16) of the bit planes, which picks the nibble and the 2-bit
// field. Codes <= 63: two pair sums fit in int16 (2 * 2 * 63 * 127 = 32004).
// The -32 offsets are summed apart, as sum_j scale_j * sum16_j: acc +=
// float(S - 32 * O) * d * d_x, O = sum_j scale_j * sum16_j (OffsetCodesS8).
struct Q6KCodes : OffsetCodesS8<kQ6KScales, kQ6KD, 5> {
  static constexpr size_t kSuper = kQ6KSuper;
  static constexpr int kRun = 2;

  static __attribute__((always_inline)) __m256i codes(const uint8_t* sb, int q, int jq, int t,
                                                      int h) {
    const int g = 4 * jq + t;  // G % 16
    __m256i lo = simd::load256(sb + 64 * (16 * (q % 2) + g) + 32 * h);
    if (q >= 2) lo = _mm256_srli_epi16(lo, 4);
    __m256i hi = simd::load256(sb + kQ6KQh + 64 * g + 32 * h);
    if (q > 0) hi = _mm256_srli_epi16(hi, 2 * q);
    hi = _mm256_and_si256(hi, _mm256_set1_epi8(3));
    return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi8(15)), _mm256_slli_epi16(hi, 4));
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

PackedTileFn q6k_for(CpuIsa isa) {
  return pick_packed<PAGELLM_IF_AMX(AmxSuper<AmxQ6K<EmuTiles>>),
                     PAGELLM_IF_AMX(AmxSuper<AmxQ6K<HwTiles>>), PAGELLM_IF_AVX512(Super512<Avx512Q6K>),
                     PAGELLM_IF_AVX2(Super256<Avx2K16<Q6KCodes>>)>(isa, q6k_scalar);
}

}  // namespace

PackedTileFn packed_q4k_fn(CpuIsa isa) {
  return k4_for<false>(isa);
}

PackedTileFn packed_q5k_fn(CpuIsa isa) {
  return k4_for<true>(isa);
}

PackedTileFn packed_q6k_fn(CpuIsa isa) {
  return q6k_for(isa);
}

PackedTileFn packed_k_amx_fn(DType wtype, bool emulated) {
  if (wtype == DType::Q4_K)
    return pick_amx<PAGELLM_IF_AMX(AmxSuper<AmxK4<false, EmuTiles>>),
                    PAGELLM_IF_AMX(AmxSuper<AmxK4<false, HwTiles>>)>(emulated);
  if (wtype == DType::Q5_K)
    return pick_amx<PAGELLM_IF_AMX(AmxSuper<AmxK4<true, EmuTiles>>),
                    PAGELLM_IF_AMX(AmxSuper<AmxK4<true, HwTiles>>)>(emulated);
  if (wtype == DType::Q6_K)
    return pick_amx<PAGELLM_IF_AMX(AmxSuper<AmxQ6K<EmuTiles>>),
                    PAGELLM_IF_AMX(AmxSuper<AmxQ6K<HwTiles>>)>(emulated);
  return nullptr;
}

}  // namespace pagellm::cpu::detail
