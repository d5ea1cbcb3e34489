// Internal to backend/cpu: the column driver and the frames shared by the
// Rows16 kernels (matmul_packed.cpp: Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL;
// matmul_packed_iq4xs.cpp: IQ4_XS; matmul_packed_k.cpp: Q4_K /
// Q5_K / Q6_K; matmul_packed_q2k.cpp, matmul_packed_q3k.cpp;
// matmul_packed_float.cpp: F16 / BF16). A kernel K provides
//   static constexpr int kCols;     // columns per register tile
//   template <int CB> static void group(int64_t n, const uint8_t* group_base,
//       const uint8_t* x, size_t x_stride, float* out, int64_t out_stride,
//       int valid_rows);            // one 16-row group times CB columns
// and drive<K> runs it over the columns (a tail of fewer than kCols columns
// with a tile of its exact width). The super-block formats (K-quants, IQ4_XS)
// write only their integer sums and float terms, as a policy of the frames
// Super512 (AVX-512 VNNI and AMX) and Super256 (AVX2); pick_packed chooses a
// format's variant for an instruction set.
#pragma once

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/amx_pair_tiles.h"
#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"

namespace pagellm::cpu::detail {

// Every Rows16 group is one forward run of bytes, which a thread reads in
// order. A tile of several columns works long enough on each block that the
// hardware prefetcher alone leaves it waiting on memory, so such tiles hint the
// L2 this far ahead (16 columns from DRAM: +10% Q4_0, +30% Q8_0). One-column
// tiles (decode) hint too where gemv_prefetch_hints() says so (cpu_isa.h):
// on Sapphire Rapids (2 threads, GEMV from DRAM, alternating binaries) Q4_0
// 21 -> 27, F16 21 -> 28, Q8_0 26.5 -> 28 GB/s, and Q4_K / Q5_K, hinting a
// super-block in quarters (prefetch_quarter), 19.5 -> 24; on Zen 4 (one
// thread) Q4_K read 20 GB/s with whole-super-block hints, 23.5 without.
constexpr size_t kPrefetchBytes = 8192;
constexpr int kPrefetchMinCols = 2;
template <int CB>
inline bool tile_hints() {
  return CB >= kPrefetchMinCols || gemv_prefetch_hints();
}
// The AVX2 integer kernels hint for every tile, one-column ones too: on Zen 3
// (2 threads, GEMV from DRAM, alternating runs) Q6_K reads 9 -> 14-19 GB/s
// with the hints, Q4_K 15 -> 16-18, Q4_0 within the noise.

// The AVX2 K-quant kernels hint a super-block (1344-3360 bytes, 21-53 lines)
// in four parts, one per quarter of their loop over it, and further ahead: a
// burst of all its lines at once outruns the core's miss buffers and stalls
// the loads behind it while nothing else is in flight (Zen 3, 2 threads,
// alternating binaries: Q4_K decode 28.3-30.5 -> 25.9-28.1 ms per token; GEMV
// from DRAM Q3_K 14.3 -> 17.6 GB/s, Q4_K 14-15 -> 15-16).
constexpr size_t kSpreadPrefetchBytes = 16384;

// Hints quarter `part` (0..3) of the kSuper bytes at sb, kSpreadPrefetchBytes
// ahead.
template <size_t kSuper>
inline __attribute__((always_inline)) void prefetch_quarter(const uint8_t* sb, int part) {
  constexpr size_t kLines = (kSuper + 63) / 64, kPer = (kLines + 3) / 4;
  const size_t end = std::min(kLines, kPer * static_cast<size_t>(part + 1));
  for (size_t l = kPer * static_cast<size_t>(part); l < end; ++l)
    simd::prefetch(sb + kSpreadPrefetchBytes + 64 * l);
}

// A split Q8_K activation row (activation_quant.h): codes, then per
// super-block d, 8 sums of 32 codes and 16 sums of 16.
struct XRowK {
  const int8_t* qs;
  const float* d;
  const int16_t* sum32;
  const int16_t* sum16;
};
inline XRowK xk_row(const uint8_t* x, int64_t n) {
  XRowK r;
  r.qs = reinterpret_cast<const int8_t*>(x);
  r.d = reinterpret_cast<const float*>(x + n);
  r.sum32 = reinterpret_cast<const int16_t*>(x + n + 4 * (n / 256));
  r.sum16 = r.sum32 + 8 * (n / 256);
  return r;
}

// Row `lane`'s value of the 16 lane-ordered f16s at p (a super-block's d or
// dmin), as float.
inline float lane_f16(const uint8_t* p, int lane) {
  uint16_t h;  // f16 bits
  std::memcpy(&h, p + 2 * lane, 2);
  return fp16_to_fp32(h);
}

// acc + S * d * d_x - M * dmin * d_x, as two fmas in that order (the SIMD
// variants' order), with d at p and dmin at p + 32 (Q2_K, Q4_K, Q5_K).
inline float add_scale_min_terms(const uint8_t* p, int lane, int32_t S, int32_t M, float dx,
                                 float acc) {
  acc = std::fma(static_cast<float>(S), lane_f16(p, lane) * dx, acc);
  return std::fma(static_cast<float>(M), -(lane_f16(p + 32, lane) * dx), acc);
}

// The scalar K-quant kernels' frame: every group of 16 rows, every column,
// the super-blocks in order; acc = terms(sb, xr, s, lane, acc) adds super-block
// s's terms of the group's row `lane` (one float chain per output, as in the
// SIMD variants).
template <size_t kSuper, class Terms>
void scalar_k_frame(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x,
                    size_t xs, int64_t cols, float* out, int64_t os, Terms terms) {
  const int64_t nsb = n / 256;
  for (int64_t g = 0; g * kPackRows < rows; ++g) {
    const uint8_t* grp = w + static_cast<size_t>(g) * gb;
    for (int64_t c = 0; c < cols; ++c) {
      const XRowK xr = xk_row(x + static_cast<size_t>(c) * xs, n);
      float acc[kPackRows] = {};
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = grp + static_cast<size_t>(s) * kSuper;
        for (int lane = 0; lane < kPackRows; ++lane) acc[lane] = terms(sb, xr, s, lane, acc[lane]);
      }
      for (int lane = 0; lane < kPackRows; ++lane) {
        const int64_t r = g * kPackRows + lane;
        if (r < rows) out[c * os + r] = acc[lane];
      }
    }
  }
}

// The Rows16 order: column chunks of 64 outermost (their activations stay in
// L2 while the weight groups pass by), then the 16-row groups:
// fn(group bytes, chunk's activations, its output, columns in the chunk,
// valid rows of the group).
template <class Fn>
inline void for_each_chunk_group(const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x,
                                 size_t xs, int64_t cols, float* out, int64_t os, Fn&& fn) {
  constexpr int64_t kColChunk = 64;
  const int64_t groups = (rows + kPackRows - 1) / kPackRows;
  for (int64_t c0 = 0; c0 < cols; c0 += kColChunk) {
    const int64_t cc = std::min(kColChunk, cols - c0);
    for (int64_t g = 0; g < groups; ++g)
      fn(w + static_cast<size_t>(g) * gb, x + static_cast<size_t>(c0) * xs,
         out + c0 * os + g * kPackRows, cc,
         static_cast<int>(std::min<int64_t>(kPackRows, rows - g * kPackRows)));
  }
}

// Dispatches a tail of 0 < left < kCols columns to group<left>.
template <class K, int CB>
void tail_of(int left, int64_t n, const uint8_t* wg, const uint8_t* x, size_t xs, float* out,
             int64_t os, int valid) {
  if constexpr (CB > 0) {
    if (left == CB) return K::template group<CB>(n, wg, x, xs, out, os, valid);
    tail_of<K, CB - 1>(left, n, wg, x, xs, out, os, valid);
  }
}

// Columns in tiles of kCols, the tail with a tile of its exact width.
template <class K>
void drive(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x, size_t xs,
           int64_t cols, float* out, int64_t os) {
  for_each_chunk_group(
      w, gb, rows, x, xs, cols, out, os,
      [&](const uint8_t* wg, const uint8_t* xc, float* og, int64_t cc, int valid) {
        int64_t c = 0;
        for (; c + K::kCols <= cc; c += K::kCols)
          K::template group<K::kCols>(n, wg, xc + c * xs, xs, og + c * os, os, valid);
        tail_of<K, K::kCols - 1>(static_cast<int>(cc - c), n, wg, xc + c * xs, xs, og + c * os,
                                 os, valid);
      });
}

// VNNI products take unsigned codes: IQ4_NL / IQ4_XS (and MXFP4) table values
// go in shifted by 128 (all within 1..241), and -128 * sum(q_x) takes the
// shift back out of the integer sum. (The AMX kernels take the values signed.)
struct ShiftedIq4 {
  alignas(16) uint8_t v[16];
};
constexpr ShiftedIq4 shifted_iq4(const int8_t (&values)[16] = kIq4NlValues) {
  ShiftedIq4 t{};
  for (int i = 0; i < 16; ++i) t.v[i] = static_cast<uint8_t>(values[i] + 128);
  return t;
}
inline constexpr ShiftedIq4 kIq4Shifted = shifted_iq4();
inline constexpr ShiftedIq4 kMxfp4Shifted = shifted_iq4(kMxfp4Values);

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// The shifted IQ4 (or other `shifted` table) values of the nibbles in A[k]
// (0..15 each), in place.
inline __attribute__((always_inline)) void iq4_shifted_values(
    __m512i (&A)[8], const ShiftedIq4& shifted = kIq4Shifted) {
  const __m512i table = _mm512_broadcast_i32x4(simd::load128(shifted.v));
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) A[k] = _mm512_shuffle_epi8(table, A[k]);
}

// The IQ4 values themselves (signed bytes) of the nibbles in A[k], in place:
// B's bytes for the signed tile products.
inline __attribute__((always_inline)) void iq4_signed_values(__m512i (&A)[8]) {
  const __m512i table = _mm512_broadcast_i32x4(simd::load128(kIq4NlValues));
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) A[k] = _mm512_shuffle_epi8(table, A[k]);
}

// A 32-element Q4_0-layout sub-block's codes (4 chunks of 64 bytes at bc) as
// the nibbles of dword groups 0..7.
inline __attribute__((always_inline)) void nibble_groups(const uint8_t* bc, __m512i (&A)[8]) {
  const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_loadu_si512(bc + 64 * k);
    A[k] = _mm512_and_si512(v, m4);
    A[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}

// Stores CB column tiles of 16 rows (out + c * os), the first `valid` rows.
template <int CB>
inline void store_rows16(float* out, int64_t os, const __m512 (&acc)[CB], int valid) {
  const __mmask16 mask = valid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
  for (int c = 0; c < CB; ++c) _mm512_mask_storeu_ps(out + c * os, mask, acc[c]);
}

// A Super512 policy's finish for the K-quant layouts with one f16 d per row
// (16 at kD in the super-block, lane order): acc[c] = fma(float(S[c]), d *
// d_x, acc[c]) for super-block s, S its exact int32 sums.
template <size_t kD>
struct RowScaleFinish {
  template <int CB>
  static __attribute__((always_inline)) void finish(const uint8_t* sb, const XRowK (&xr)[CB],
                                                    int64_t s, const __m512i (&S)[CB],
                                                    __m512 (&acc)[CB]) {
    const __m512 dv = _mm512_cvtph_ps(simd::load256(sb + kD));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c)
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[c]),
                               _mm512_mul_ps(dv, _mm512_set1_ps(xr[c].d[s])), acc[c]);
  }
};

namespace vnni {
#include "backend/cpu/super512_frame.inc"
}  // namespace vnni
// Super512 on AVX-512 VNNI (its AMX twin below: a policy's always-inline
// tile code must be compiled for the AMX set).
template <class P>
using Super512 = vnni::Super512<P>;
PAGELLM_TARGET_END
#endif

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// Stores CB column tiles of 16 rows held as two 8-row halves (acc[0]: rows
// 0-7, acc[1]: rows 8-15; column c at out + c * os), the first `valid` rows.
template <int CB>
inline void store_rows8x2(float* out, int64_t os, const __m256 (&acc)[2][CB], int valid) {
  for (int h = 0; h < 2 && 8 * h < valid; ++h) {
    const int n = std::min(8, valid - 8 * h);
    for (int c = 0; c < CB; ++c) {
      float* o = out + c * os + 8 * h;
      if (n == 8) {
        _mm256_storeu_ps(o, acc[h][c]);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, acc[h][c]);
        std::memcpy(o, tmp, sizeof(float) * static_cast<size_t>(n));
      }
    }
  }
}

// The AVX2 Rows16 kernels' inner step: the code registers A of one dword
// group (rows 0-7, 8-15; unsigned) times each column's four activation codes
// at xr[c].qs + off, added to the column's int16 pair sums P[half][c]. The
// sums are pinned to registers after the step (simd::pin). The caller keeps
// them within int16.
template <int CB, class XR>
inline __attribute__((always_inline)) void add_pair_sums(const __m256i (&A)[2], const XR (&xr)[CB],
                                                         size_t off, __m256i (&P)[2][CB]) {
#pragma GCC unroll 16
  for (int c = 0; c < CB; ++c) {
    const __m256i y = _mm256_set1_epi32(static_cast<int32_t>(simd::load_u32(xr[c].qs + off)));
    P[0][c] = _mm256_add_epi16(P[0][c], _mm256_maddubs_epi16(A[0], y));
    P[1][c] = _mm256_add_epi16(P[1][c], _mm256_maddubs_epi16(A[1], y));
  }
#pragma GCC unroll 16
  for (int c = 0; c < CB; ++c) {
    simd::pin(P[0][c]);
    simd::pin(P[1][c]);
  }
}

// add_pair_sums for signed weights W (Q8_0, the IQ4 table values): |W| times
// each column's four codes with W's sign (pair sums <= 2 * 128 * 127, one
// widening each), madd'ed with w[half] (ones, or a sub-block's scale pairs)
// into the column's int32 sums I[half][c]; pinned after the step.
template <int CB, class XR>
inline __attribute__((always_inline)) void add_signed_products(const __m256i (&W)[2],
                                                               const XR (&xr)[CB], size_t off,
                                                               const __m256i (&w)[2],
                                                               __m256i (&I)[2][CB]) {
  const __m256i U[2] = {_mm256_abs_epi8(W[0]), _mm256_abs_epi8(W[1])};
#pragma GCC unroll 16
  for (int c = 0; c < CB; ++c) {
    const __m256i y = _mm256_set1_epi32(static_cast<int32_t>(simd::load_u32(xr[c].qs + off)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
      I[h][c] = _mm256_add_epi32(
          I[h][c], _mm256_madd_epi16(_mm256_maddubs_epi16(U[h], _mm256_sign_epi8(y, W[h])), w[h]));
  }
#pragma GCC unroll 16
  for (int c = 0; c < CB; ++c) {
    simd::pin(I[0][c]);
    simd::pin(I[1][c]);
  }
}

// The IQ4 table values (kIq4NlValues, or another 16-value table) of dword
// group t of a Q4_0-layout nibble register v: low nibbles for t < 4, high ones after.
inline __attribute__((always_inline)) __m256i iq4_values(
    __m256i v, int t, const int8_t (&values)[16] = kIq4NlValues) {
  const __m256i table = _mm256_broadcastsi128_si256(simd::load128(values));
  return _mm256_shuffle_epi8(
      table, _mm256_and_si256(t >= 4 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(15)));
}

// Eight signed bytes at p (one per row of a half) as int16 pairs (v, v), the
// scale operand of add_scaled_sums.
inline __m256i scale_pairs_s8(const uint8_t* p) {
  const __m256i s32 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xFFFF)),
                         _mm256_slli_epi32(s32, 16));
}

// O[c] += sum over the 16 sub-blocks j of w_j * sum16_j (xr[c]'s sums of 16
// codes of super-block s) for the rows of one half, two sub-blocks per madd:
// pairs(p) widens the 16 interleaved bytes (w_j, w_j+1) of the half's 8 rows,
// read from the rows' bytes 16 j + 8 h of w (16 bytes per sub-block), to
// int16 pairs.
template <int CB, class Pairs>
inline __attribute__((always_inline)) void add_sub_sums16(const uint8_t* w, int h,
                                                          const XRowK (&xr)[CB], int64_t s,
                                                          Pairs pairs, __m256i (&O)[CB]) {
  for (int j = 0; j < 16; j += 2) {
    const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 16 * j + 8 * h));
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 16 * (j + 1) + 8 * h));
    const __m256i wp = pairs(_mm_unpacklo_epi8(a, b));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c)
      O[c] = _mm256_add_epi32(
          O[c], _mm256_madd_epi16(wp, _mm256_set1_epi32(static_cast<int32_t>(
                                          simd::load_u32(xr[c].sum16 + 16 * s + j)))));
  }
}

// S[half][c] += P[half][c] * sc[half] as int16 pairs (one madd: the scale
// pairs hold each row's scale twice, so this is scale * (P + P'), exact).
template <int CB>
inline __attribute__((always_inline)) void add_scaled_sums(const __m256i (&P)[2][CB],
                                                           const __m256i (&sc)[2],
                                                           __m256i (&S)[2][CB]) {
#pragma GCC unroll 16
  for (int c = 0; c < CB; ++c) {
    S[0][c] = _mm256_add_epi32(S[0][c], _mm256_madd_epi16(P[0][c], sc[0]));
    S[1][c] = _mm256_add_epi32(S[1][c], _mm256_madd_epi16(P[1][c], sc[1]));
  }
}

// Avx2K16's scales and finish for signed int8 scales (at kScales in the
// super-block) and codes offset by 2^kShift (Q3_K: 4, Q6_K: 32): acc +=
// float(S - 2^kShift * O) * d * d_x for half h, with O = sum_j scale_j *
// sum16_j and d the 16 f16s at kD.
template <size_t kScales, size_t kD, int kShift>
struct OffsetCodesS8 {
  static __attribute__((always_inline)) __m256i scales(const uint8_t* sb, int j, int h) {
    return scale_pairs_s8(sb + kScales + 16 * j + 8 * h);
  }

  template <int CB>
  static __attribute__((always_inline)) void finish(const uint8_t* sb, int h, const XRowK (&xr)[CB],
                                                    int64_t s, const __m256i (&S)[CB],
                                                    __m256 (&acc)[CB]) {
    __m256i O[CB];
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) O[c] = _mm256_setzero_si256();
    add_sub_sums16<CB>(
        sb + kScales, h, xr, s, [](__m128i v) { return _mm256_cvtepi8_epi16(v); }, O);
    const __m256 dv =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kD + 16 * h)));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) {
      const __m256i I = _mm256_sub_epi32(S[c], _mm256_slli_epi32(O[c], kShift));
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I),
                               _mm256_mul_ps(dv, _mm256_set1_ps(xr[c].d[s])), acc[c]);
    }
  }
};

// The super-block frame of AVX2 (one ymm = 8 rows, a group is two halves):
// Super512's, with per half h the float terms of P::finish.
//   P::kCols, P::kSuper
//   P::sums<CB>(sb, xr, s, S)                 adds super-block s's sums of
//                                             both halves (S[h][c])
//   P::finish<CB>(sb, h, xr, s, S[h], acc[h])  adds half h's float terms
template <class P>
struct Super256 {
  static constexpr int kCols = P::kCols;

  template <int CB>
  static void group(int64_t n, const uint8_t* grp, const uint8_t* x, size_t xs, float* out,
                    int64_t os, int valid) {
    const int64_t nsb = n / 256;
    XRowK xr[CB];
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) xr[c] = xk_row(x + static_cast<size_t>(c) * xs, n);
    __m256 acc[2][CB];
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) acc[0][c] = acc[1][c] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = grp + static_cast<size_t>(s) * P::kSuper;
      __m256i S[2][CB];
#pragma GCC unroll 16
      for (int c = 0; c < CB; ++c) S[0][c] = S[1][c] = _mm256_setzero_si256();
      P::template sums<CB>(sb, xr, s, S);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) P::template finish<CB>(sb, h, xr, s, S[h], acc[h]);
    }
    store_rows8x2<CB>(out, os, acc, valid);
  }
};

// Super256's policy for the K-quants with 16-element sub-blocks (Q2_K, Q3_K,
// Q6_K), over a code policy Q. Both halves of a group go through in one pass,
// columns innermost. Sub-block j = 4q + jq takes its codes from quarter q of
// the bit planes; q is unrolled, so the shifts that select them are constants.
// Each sub-block's int16 pair sums meet its scales in one madd, and Q::finish
// turns the super-block's exact int32 sums S into float terms.
//   Q::kSuper                 bytes per super-block
//   Q::kRun                   dword groups (of 4) whose pair sums stay within
//                             int16 added up (2 or 4)
//   Q::codes(sb, q, jq, t, h) the unsigned codes of dword group t (0..3) of
//                             sub-block 4q + jq for the rows of half h
//   Q::scales(sb, j, h)       sub-block j's scales of half h's rows, as int16
//                             pairs (add_scaled_sums)
//   Q::finish<CB>(sb, h, xr, s, S, acc)  adds the super-block's terms of half h
template <class Q>
struct Avx2K16 : Q {
  static constexpr int kCols = 4;

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&xr)[CB],
                                                  int64_t s, __m256i (&S)[2][CB]) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      prefetch_quarter<Q::kSuper>(sb, q);
      for (int jq = 0; jq < 4; ++jq) {
        const int j = 4 * q + jq;
        const __m256i sc[2] = {Q::scales(sb, j, 0), Q::scales(sb, j, 1)};
#pragma GCC unroll 2
        for (int t0 = 0; t0 < 4; t0 += Q::kRun) {
          __m256i P[2][CB];
#pragma GCC unroll 16
          for (int c = 0; c < CB; ++c) P[0][c] = P[1][c] = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int t = t0; t < t0 + Q::kRun; ++t) {
            const __m256i A[2] = {Q::codes(sb, q, jq, t, 0), Q::codes(sb, q, jq, t, 1)};
            add_pair_sums<CB>(A, xr, static_cast<size_t>(256 * s + 16 * j + 4 * t), P);
          }
          add_scaled_sums<CB>(P, sc, S);
        }
      }
    }
  }
};
PAGELLM_TARGET_END
#endif

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Super512's policy for Q2_K and Q3_K (16-element sub-blocks), over a code
// policy Q. Per sub-block j, the four dword groups' unsigned codes through
// vpdpbusd (two chains for narrow tiles), the codes' offset taken back as
// -kOffset * sum16_j, times the sub-block's scales in int32: S = sum_j
// scale_j * (I_j - kOffset * sum16_j), exact.
//   Q::kSuper, Q::kOffset
//   Q::codes(sb, G)          the unsigned codes of dword group G (0..63)
//   Q::scales(sb, j)         sub-block j's scales, one int32 per row
//   Q::finish<CB>(sb, xr, s, S, acc)  adds the super-block's float terms
template <class Q>
struct Avx512K16 : Q {
  static constexpr int kCols = 8;

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&xr)[CB],
                                                  int64_t s, const uint8_t*, size_t, bool hint,
                                                  __m512i (&S)[CB]) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      if (hint) prefetch_quarter<Q::kSuper>(sb, q);
#pragma GCC unroll 4
      for (int jq = 0; jq < 4; ++jq) {
        const int j = 4 * q + jq;
        __m512i A[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) A[t] = Q::codes(sb, 4 * j + t);
        const __m512i sc = Q::scales(sb, j);
#pragma GCC unroll 16
        for (int c = 0; c < CB; ++c) {
          const int8_t* qx = xr[c].qs + 256 * s + 16 * j;
          __m512i I = _mm512_set1_epi32(-Q::kOffset * xr[c].sum16[16 * s + j]);
          if constexpr (CB <= 2) {
            __m512i J = _mm512_setzero_si512();
            I = simd::dpbusd_bcast(I, A[0], qx);
            J = simd::dpbusd_bcast(J, A[1], qx + 4);
            I = simd::dpbusd_bcast(I, A[2], qx + 8);
            J = simd::dpbusd_bcast(J, A[3], qx + 12);
            I = _mm512_add_epi32(I, J);
          } else {
#pragma GCC unroll 4
            for (int t = 0; t < 4; ++t) I = simd::dpbusd_bcast(I, A[t], qx + 4 * t);
          }
          S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(I, sc));
        }
      }
    }
  }
};
PAGELLM_TARGET_END
#endif

#if PAGELLM_HAVE_AMX
PAGELLM_TARGET_AMX
// drive()'s order for an AMX kernel K (K::group<CB> for CB <= 16 on tiles
// configured for CB: K::Tiles, pair_tiles of K::kKBytes) with the VNNI kernel
// K::Vnni for column tiles narrower than kAmxMinCols, and for everything when
// there are fewer columns than that (Vnni computes the same bits; no
// reconfiguration). Tiles are configured when the width changes and released
// at the end.
constexpr int kAmxMinCols = 4;
template <class K>
void drive_amx(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x, size_t xs,
               int64_t cols, float* out, int64_t os) {
  using V = typename K::Vnni;
  if (cols < kAmxMinCols) return drive<V>(n, w, gb, rows, x, xs, cols, out, os);
  int configured = 0;
  for_each_chunk_group(w, gb, rows, x, xs, cols, out, os,
                       [&](const uint8_t* wg, const uint8_t* xc, float* og, int64_t cc, int valid) {
                         for (int64_t c = 0; c < cc; c += 16) {
                           const int width = static_cast<int>(std::min<int64_t>(16, cc - c));
                           if (width < kAmxMinCols) {
                             drive<V>(n, wg, gb, valid, xc + c * xs, xs, width, og + c * os, os);
                             continue;
                           }
                           if (width != configured) {
                             K::Tiles::configure(pair_tiles(width, K::kKBytes));
                             configured = width;
                           }
                           tail_of<K, 16>(width, n, wg, xc + c * xs, xs, og + c * os, os, valid);
                         }
                       });
  if (configured) K::Tiles::release();
}

// An AMX kernel of a super-block format: Super512, compiled for AMX, over a
// tile policy P (its sums on the tiles, P::Tiles, P::kKBytes; P::Vnni the
// format's VNNI kernel).
namespace amx {
#include "backend/cpu/super512_frame.inc"
}  // namespace amx
template <class P>
struct AmxSuper : amx::Super512<P> {
  using Tiles = typename P::Tiles;
  using Vnni = typename P::Vnni;
  static constexpr int kKBytes = P::kKBytes;
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AMX

// A kernel type where its instruction set is compiled in, else void (for
// pick_packed).
#if PAGELLM_HAVE_AMX
#define PAGELLM_IF_AMX(...) __VA_ARGS__
#else
#define PAGELLM_IF_AMX(...) void
#endif
#if PAGELLM_HAVE_AVX512
#define PAGELLM_IF_AVX512(...) __VA_ARGS__
#else
#define PAGELLM_IF_AVX512(...) void
#endif
#if PAGELLM_HAVE_AVX2
#define PAGELLM_IF_AVX2(...) __VA_ARGS__
#else
#define PAGELLM_IF_AVX2(...) void
#endif

// A format's kernel for `isa`: with Avx512 its AMX kernel on the tile model
// when asked for, else on the CPU's tiles where it has them (AmxEmu, AmxHw:
// drive_amx kernels over EmuTiles, HwTiles), else V512; V256 for Avx2;
// `scalar` for Scalar. A void kernel (none for that set, or not compiled in)
// gives nullptr.
template <class AmxEmu, class AmxHw, class V512, class V256>
PackedTileFn pick_packed(CpuIsa isa, PackedTileFn scalar) {
#if PAGELLM_HAVE_AMX
  if constexpr (!std::is_void_v<AmxEmu>) {
    if (isa == CpuIsa::Avx512 && amx_tile_model_requested()) return drive_amx<AmxEmu>;
    if (isa == CpuIsa::Avx512 && amx_int8_available()) return drive_amx<AmxHw>;
  }
#endif
  if constexpr (!std::is_void_v<V512>)
    if (isa == CpuIsa::Avx512) return drive<V512>;
  if constexpr (!std::is_void_v<V256>)
    if (isa == CpuIsa::Avx2) return drive<V256>;
  return isa == CpuIsa::Scalar ? scalar : nullptr;
}

// The AMX kernel alone (packed_amx_fn), nullptr where it is not compiled in.
template <class AmxEmu, class AmxHw>
PackedTileFn pick_amx(bool emulated) {
#if PAGELLM_HAVE_AMX
  if constexpr (!std::is_void_v<AmxEmu>) return emulated ? drive_amx<AmxEmu> : drive_amx<AmxHw>;
#endif
  (void)emulated;
  return nullptr;
}

// The K-quant kernels (matmul_packed_k.cpp); nullptr when the variant is not
// compiled in.
PackedTileFn packed_q4k_fn(CpuIsa isa);
PackedTileFn packed_q5k_fn(CpuIsa isa);
PackedTileFn packed_q6k_fn(CpuIsa isa);
// Q2_K and Q3_K (matmul_packed_q2k.cpp, matmul_packed_q3k.cpp): scalar, AVX2
// and AVX-512 VNNI. No AMX kernel: tiles of 16-byte rows (16-element
// sub-blocks) ran 3-10% slower than VNNI on Sapphire Rapids.
PackedTileFn packed_q2k_fn(CpuIsa isa);
PackedTileFn packed_q3k_fn(CpuIsa isa);
// IQ4_XS (matmul_packed_iq4xs.cpp): scalar, AVX2, AVX-512 VNNI and AMX; its
// AMX kernel alone as packed_amx_fn.
PackedTileFn packed_iq4xs_fn(CpuIsa isa);
PackedTileFn packed_iq4xs_amx_fn(bool emulated);
// F16 / BF16 (matmul_packed_float.cpp).
PackedTileFn packed_float_fn(DType wtype, CpuIsa isa);
// Their AMX kernels (Q4_K, Q5_K, Q6_K), as packed_amx_fn.
PackedTileFn packed_k_amx_fn(DType wtype, bool emulated);

}  // namespace pagellm::cpu::detail
