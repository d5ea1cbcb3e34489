// Rows16 (packed_weights.h) Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL / MXFP4
// weights times split Q8_0 activations (activation_quant.h). For weight row r,
// activation row c and block b:
//   I      = sum over the block of q_w * q_x, exact in int32 (IQ4_NL: q_w =
//            kIq4NlValues[code]; MXFP4: kMxfp4Values[code], d_w = 2^(e-128))
//            (VNNI: codes (u8) times q_x, plus -offset * sum(q_x) from the row)
//   acc_rc = fma(float(I), d_w * d_x, acc_rc)         blocks in order, from 0
//   acc_rc = fma(float(sum(q_x)), m_w * d_x, acc_rc)  Q4_1 / Q5_1 (q_w = code)
// and the output is acc_rc: one float chain per output, kept in one lane of a
// register that holds 16 (AVX-512) or 8 (AVX2) rows. The scalar, AVX2 and
// AVX-512 variants compute exactly this and agree bit for bit, whatever the
// batch size (columns are only ever grouped, never mixed). On AVX-512 the
// codes go into VNNI as unsigned bytes (IQ4_NL's table values + 128), and
// with AMX-INT8 tiles of 4+ columns take the same integer sums.
#include "backend/cpu/packed_drive.h"  // first: wraps <immintrin.h>

#include <cmath>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/fp16.h"

namespace pagellm::cpu::detail {

namespace {

// kCodeBytes, kScaleBytes: C and S of packed_weights.h; kOffset: code - q_w;
// kFifthBit: Q5 codes; kMin: value = d * code + m; kTable: q_w =
// kValues[code]; kE8m0: the scales are MXFP4's exponent bytes.
template <DType T>
struct Traits {
  static constexpr bool kFifthBit = T == DType::Q5_0 || T == DType::Q5_1;
  static constexpr bool kMin = T == DType::Q4_1 || T == DType::Q5_1;
  static constexpr bool kE8m0 = T == DType::MXFP4;
  static constexpr bool kTable = T == DType::IQ4_NL || kE8m0;
  static constexpr const int8_t (&kValues)[16] = kE8m0 ? kMxfp4Values : kIq4NlValues;
  static constexpr size_t kCodeBytes = T == DType::Q8_0 ? 512 : kFifthBit ? 320 : 256;
  static constexpr size_t kScaleBytes = kMin ? 64 : kE8m0 ? 16 : 32;
  static constexpr int kOffset = T == DType::Q8_0 ? 128 : kMin || kTable ? 0 : kFifthBit ? 16 : 8;
};

// Pointers into one split activation row.
struct XRow {
  const int8_t* qs;
  const float* d;
  const int32_t* sum;
};
inline XRow x_row(const uint8_t* x, int64_t n) {
  XRow r;
  r.qs = reinterpret_cast<const int8_t*>(x);
  r.d = reinterpret_cast<const float*>(x + n);
  r.sum = reinterpret_cast<const int32_t*>(x + n + 4 * (n / 32));
  return r;
}

// ---- scalar reference ----------------------------------------------------------

template <DType T>
int code_of(const uint8_t* block_codes, int k, int lane, int j) {
  if constexpr (T == DType::Q8_0) {
    return block_codes[64 * k + 4 * lane + j];
  } else if constexpr (Traits<T>::kFifthBit) {
    const uint8_t v = block_codes[64 + 64 * (k % 4) + 4 * lane + j];
    const int bit = (block_codes[4 * lane + j] >> k) & 1;
    return (k < 4 ? (v & 15) : (v >> 4)) + 16 * bit;
  } else {
    const uint8_t v = block_codes[64 * (k % 4) + 4 * lane + j];
    const int code = k < 4 ? (v & 15) : (v >> 4);
    return Traits<T>::kTable ? Traits<T>::kValues[code] : code;
  }
}

template <DType T>
void packed_scalar(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x,
                   size_t xs, int64_t cols, float* out, int64_t os) {
  constexpr size_t C = Traits<T>::kCodeBytes, S = Traits<T>::kScaleBytes;
  const int64_t nb = n / 32;
  for (int64_t g = 0; g * kPackRows < rows; ++g) {
    const uint8_t* group = w + static_cast<size_t>(g) * gb;
    for (int64_t c = 0; c < cols; ++c) {
      const XRow xr = x_row(x + static_cast<size_t>(c) * xs, n);
      float acc[kPackRows] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* bc = group + rows16_codes_at(b, C, S);
        const uint8_t* sc = group + rows16_scales_at(b, nb, C, S);
        const int8_t* q = xr.qs + 32 * b;
        for (int lane = 0; lane < kPackRows; ++lane) {
          int32_t I = -Traits<T>::kOffset * xr.sum[b];
          for (int k = 0; k < 8; ++k)
            for (int j = 0; j < 4; ++j) I += code_of<T>(bc, k, lane, j) * q[4 * k + j];
          f16_t h;
          std::memcpy(&h, sc + 2 * lane, 2);
          const float dw = Traits<T>::kE8m0 ? mxfp4_half_scale(sc[lane]) : fp16_to_fp32(h);
          const float s = dw * xr.d[b];
          acc[lane] = std::fma(static_cast<float>(I), s, acc[lane]);
          if constexpr (Traits<T>::kMin) {
            std::memcpy(&h, sc + 32 + 2 * lane, 2);
            acc[lane] =
                std::fma(static_cast<float>(xr.sum[b]), fp16_to_fp32(h) * xr.d[b], acc[lane]);
          }
        }
      }
      for (int lane = 0; lane < kPackRows; ++lane) {
        const int64_t r = g * kPackRows + lane;
        if (r < rows) out[c * os + r] = acc[lane];
      }
    }
  }
}

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// ---- AVX-512 VNNI: one zmm = 16 rows ------------------------------------------

// The -offset of the unsigned codes VNNI and AMX take (IQ4_NL: kIq4Shifted).
template <DType T>
constexpr int kVnniOffset = Traits<T>::kTable ? 128 : Traits<T>::kOffset;

// 16 MXFP4 exponent bytes as the exponents of their half scales, e - 128 (as
// floats): the epilogue scales d_x by them (vscalefps), which is d_w * d_x
// bit for bit (d_w = 2^(e-128) exactly, subnormals included) in fewer
// instructions than building d_w.
inline __attribute__((always_inline)) __m512 mxfp4_exponents16(const uint8_t* e8) {
  const __m512i e = _mm512_cvtepu8_epi32(simd::load128(e8));
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128)));
}

// The 16 rows' d_w of a block whose scales start at sc (MXFP4: its exponents).
template <DType T>
inline __attribute__((always_inline)) __m512 scales16(const uint8_t* sc) {
  if constexpr (Traits<T>::kE8m0) return mxfp4_exponents16(sc);
  return _mm512_cvtph_ps(simd::load256(sc));
}

namespace vnni {
#include "backend/cpu/block_pair_frame.inc"
}  // namespace vnni

template <DType T>
struct Avx512 : vnni::BlockFrame<Avx512<T>> {
  static constexpr int kCols = 16;
  static constexpr size_t C = Traits<T>::kCodeBytes, S = Traits<T>::kScaleBytes;
  static constexpr bool kHintAlways = false;

  // The block's unsigned codes of dword group k, for 16 rows (bc: its codes).
  static inline __attribute__((always_inline)) void codes(const uint8_t* bc, __m512i (&A)[8]) {
    if constexpr (T == DType::Q8_0) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) A[k] = _mm512_loadu_si512(bc + 64 * k);
    } else {
      nibble_groups(Traits<T>::kFifthBit ? bc + 64 : bc, A);
      if constexpr (Traits<T>::kFifthBit) {
        const __m512i hb = _mm512_loadu_si512(bc);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
          A[k] = _mm512_mask_add_epi8(
              A[k], _mm512_test_epi8_mask(hb, _mm512_set1_epi8(static_cast<char>(1 << k))), A[k],
              _mm512_set1_epi8(16));
      } else if constexpr (Traits<T>::kE8m0) {
        iq4_shifted_values(A, kMxfp4Shifted);
      } else if constexpr (Traits<T>::kTable) {
        iq4_shifted_values(A);
      }
    }
  }

  // Block b (codes bc, scales sc) times CB columns, into acc.
  template <int CB>
  static inline __attribute__((always_inline)) void block(const uint8_t* bc, const uint8_t* sc,
                                                          const XRow (&xr)[CB], int64_t b,
                                                          __m512 (&acc)[CB]) {
    __m512i A[8];
    codes(bc, A);
    const __m512 dw = scales16<T>(sc);
    [[maybe_unused]] __m512 mw;  // the mins (Q4_1, Q5_1)
    if constexpr (Traits<T>::kMin) mw = _mm512_cvtph_ps(simd::load256(sc + 32));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) {
      const int8_t* q = xr[c].qs + 32 * b;
      __m512i I = _mm512_set1_epi32(-kVnniOffset<T> * xr[c].sum[b]);
      if constexpr (CB <= 2) {
        // Few columns: two independent chains so the dpbusd latency hides.
        __m512i J = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int k = 0; k < 8; k += 2) {
          I = simd::dpbusd_bcast(I, A[k], q + 4 * k);
          J = simd::dpbusd_bcast(J, A[k + 1], q + 4 * k + 4);
        }
        I = _mm512_add_epi32(I, J);
      } else {
#pragma GCC unroll 16
        for (int k = 0; k < 8; ++k) I = simd::dpbusd_bcast(I, A[k], q + 4 * k);
      }
      epilogue<CB>(I, dw, mw, xr[c], b, acc[c]);
    }
  }

  // acc = fma(float(I), d_w * d_x, acc), then Q4_1 / Q5_1's
  // fma(float(sum q_x), m_w * d_x, acc): the contract's order.
  template <int CB>
  static inline __attribute__((always_inline)) void epilogue(__m512i I, __m512 dw,
                                                             [[maybe_unused]] __m512 mw,
                                                             const XRow& xr, int64_t b,
                                                             __m512& acc) {
    const __m512 dx = _mm512_set1_ps(xr.d[b]);
    const __m512 s = Traits<T>::kE8m0 ? _mm512_scalef_ps(dx, dw) : _mm512_mul_ps(dw, dx);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), s, acc);
    if constexpr (Traits<T>::kMin)
      acc = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(xr.sum[b])), _mm512_mul_ps(mw, dx),
                            acc);
  }

  // BlockFrame's steps: a pair of blocks, the odd last block.
  template <int CB>
  static __attribute__((always_inline)) void pair(const uint8_t* p, const uint8_t*, size_t,
                                                  const XRow (&xr)[CB], int64_t b,
                                                  __m512 (&acc)[CB]) {
    block<CB>(p, p + 2 * C, xr, b, acc);
    block<CB>(p + C, p + 2 * C + S, xr, b + 1, acc);
  }
  template <int CB>
  static __attribute__((always_inline)) void last(const uint8_t* p, const uint8_t*, size_t,
                                                  const XRow (&xr)[CB], int64_t b,
                                                  __m512 (&acc)[CB]) {
    block<CB>(p, p + C, xr, b, acc);
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

#if PAGELLM_HAVE_AMX
PAGELLM_TARGET_AMX
namespace amx {
#include "backend/cpu/block_pair_frame.inc"
}  // namespace amx

// ---- AMX: tiles of up to 16 columns (amx_tiles.h) -----------------------------
//
// Per block b of a 16-row group:
//   A (CB rows x 32 bytes, s8)   each column's 32 activation codes of block b
//   B (8 rows x 64 bytes, s8)    row k = dword group k's four weight values
//                                q_w of the 16 rows (codes spread to bytes,
//                                less the type's offset)
//   C = A B (CB rows x 16 int32) row c = the column's block sums I of the 16
//                                weight rows, exact (TDPBSSD)
// and the float epilogue is the VNNI kernel's on the same integers, so both
// give the same bits; the signed B spares the epilogue VNNI's offset term.
// Blocks go in pairs: tiles 0, 1 = A; 2, 3 = B; 4, 5 = C.
template <DType T, class TilesT>
struct Amx : amx::BlockFrame<Amx<T, TilesT>> {
  static constexpr size_t C = Traits<T>::kCodeBytes, S = Traits<T>::kScaleBytes;
  static constexpr bool kHintAlways = true;
  using Tiles = TilesT;
  using Vnni = Avx512<T>;  // narrower column tiles (drive_amx)
  static constexpr int kKBytes = 32;

  // The block's weight values q_w as B's signed bytes (the VNNI kernel's
  // codes less kVnniOffset, -128..127), so the tile sums need no offset term.
  static inline __attribute__((always_inline)) const uint8_t* b_bytes(const uint8_t* bc,
                                                                      uint8_t* buf) {
    __m512i A[8];
    Avx512<T>::codes(bc, A);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      if constexpr (kVnniOffset<T> != 0)
        A[k] = _mm512_sub_epi8(A[k], _mm512_set1_epi8(static_cast<char>(kVnniOffset<T>)));
      _mm512_store_si512(buf + 64 * k, A[k]);
    }
    return buf;
  }

  // acc[c] += column c's sums of block b (scales sc), as Avx512::block does.
  template <int CB>
  static inline __attribute__((always_inline)) void scale(const int32_t (&sums)[16][16],
                                                          const uint8_t* sc, const XRow (&xr)[CB],
                                                          int64_t b, __m512 (&acc)[CB]) {
    const __m512 dw = scales16<T>(sc);
    [[maybe_unused]] __m512 mw;
    if constexpr (Traits<T>::kMin) mw = _mm512_cvtph_ps(simd::load256(sc + 32));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c)
      Avx512<T>::template epilogue<CB>(_mm512_load_si512(sums[c]), dw, mw, xr[c], b, acc[c]);
  }

  // BlockFrame's steps (the tiles are configured for CB): a pair of blocks
  // on the pair tiles, the odd last block on the first.
  template <int CB>
  static __attribute__((always_inline)) void pair(const uint8_t* p, const uint8_t* x, size_t xs,
                                                  const XRow (&xr)[CB], int64_t b,
                                                  __m512 (&acc)[CB]) {
    alignas(64) uint8_t codes[2][512];
    alignas(64) int32_t sums[2][16][16];
    pair_products<Tiles, true>(x + 32 * b, x + 32 * (b + 1), xs, b_bytes(p, codes[0]),
                               b_bytes(p + C, codes[1]), sums);
    scale<CB>(sums[0], p + 2 * C, xr, b, acc);
    scale<CB>(sums[1], p + 2 * C + S, xr, b + 1, acc);
  }
  template <int CB>
  static __attribute__((always_inline)) void last(const uint8_t* p, const uint8_t* x, size_t xs,
                                                  const XRow (&xr)[CB], int64_t b,
                                                  __m512 (&acc)[CB]) {
    alignas(64) uint8_t codes[512];
    alignas(64) int32_t sums[2][16][16];
    first_product<Tiles, true>(x + 32 * b, xs, b_bytes(p, codes), sums);
    scale<CB>(sums[0], p + C, xr, b, acc);
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AMX

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// ---- AVX2: one ymm = 8 rows, a group is two of them ---------------------------
//
// Both halves of a group go through in one pass (every 64-byte line of codes
// is used once, one forward stream), dword group k outermost: the two code
// registers of group k meet each column's broadcast activations, so a column
// costs one broadcast per k for 16 rows and the register set is the 2 x CB
// block sums (AVX2 has 16 registers; the float accumulators are touched once
// per block and may live in L1).

template <DType T>
struct Avx2 {
  // Rows 8h..8h+7's d_w of a block whose scales start at sc (f16, or MXFP4's
  // exponent bytes widened to 2^(e-128) as mxfp4_half_scale does).
  static inline __attribute__((always_inline)) __m256 scales8(const uint8_t* sc, int h) {
    if constexpr (Traits<T>::kE8m0) {
      const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
          reinterpret_cast<const __m128i*>(sc + 8 * h)));
      const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
      const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
      const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
      return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
    }
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 16 * h)));
  }

  // Signed weight values (Q8_0, IQ4_NL): |w| times x with w's sign, one
  // widening per product, so fewer columns keep their sums in registers.
  static constexpr bool kSigned = T == DType::Q8_0 || Traits<T>::kTable;
  static constexpr int kCols = kSigned ? 3 : 4;

  // Q5_0's / Q5_1's codes of dword group k for half h: the nibbles of v (chunk k % 4)
  // plus 16 times bit k of the fifth-bit bytes hb. A 16-bit shift moves bit k
  // of both bytes of a lane to bit 4, where the mask keeps it.
  // (k is a constant once the caller's loop is unrolled.)
  static inline __attribute__((always_inline)) __m256i q5_codes(int k, __m256i v, __m256i hb) {
    const __m256i nib =
        _mm256_and_si256(k >= 4 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(15));
    const __m256i bit = k < 4   ? _mm256_slli_epi16(hb, 4 - k)
                        : k > 4 ? _mm256_srli_epi16(hb, k - 4)
                                : hb;
    return _mm256_or_si256(nib, _mm256_and_si256(bit, _mm256_set1_epi8(16)));
  }

  template <int CB>
  static void group(int64_t n, const uint8_t* codes, const uint8_t* x, size_t xs, float* out,
                    int64_t os, int valid) {
    constexpr size_t C = Traits<T>::kCodeBytes, S = Traits<T>::kScaleBytes;
    const int64_t nb = n / 32;
    XRow xr[CB];
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) xr[c] = x_row(x + static_cast<size_t>(c) * xs, n);
    __m256 acc[2][CB];
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c) acc[0][c] = acc[1][c] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    // Block b's codes at bc, its scales at sc (rows16_codes_at / _scales_at).
    auto block = [&](int64_t b, const uint8_t* bc, const uint8_t* sc)
        __attribute__((always_inline)) {
      for (size_t l = 0; l < C; l += 64) simd::prefetch(bc + kPrefetchBytes + l);
      simd::prefetch(sc + kPrefetchBytes);
      __m256i I[2][CB];
      if constexpr (T == DType::Q4_0 || T == DType::Q4_1) {
        // Codes <= 15: a pair sum is at most 2 * 15 * 128 = 3840, so the
        // block's eight add up in int16 (<= 30720) and widen once.
        const __m256i m4 = _mm256_set1_epi8(15);
        __m256i P[2][CB];
#pragma GCC unroll 16
        for (int c = 0; c < CB; ++c) P[0][c] = P[1][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          __m256i A[2];
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const __m256i v = simd::load256(bc + 64 * (k % 4) + 32 * h);
            A[h] = _mm256_and_si256(k >= 4 ? _mm256_srli_epi16(v, 4) : v, m4);
          }
          add_pair_sums<CB>(A, xr, static_cast<size_t>(32 * b + 4 * k), P);
        }
#pragma GCC unroll 16
        for (int c = 0; c < CB; ++c) {
          I[0][c] = _mm256_madd_epi16(P[0][c], ones);
          I[1][c] = _mm256_madd_epi16(P[1][c], ones);
        }
      } else if constexpr (Traits<T>::kFifthBit) {
        // Codes <= 31: pair sums <= 2 * 31 * 128 = 7936, so four dword groups
        // add up in int16 (<= 31744); the block widens twice.
        const __m256i hb[2] = {simd::load256(bc), simd::load256(bc + 32)};
#pragma GCC unroll 2
        for (int run = 0; run < 2; ++run) {
          __m256i P[2][CB];
#pragma GCC unroll 16
          for (int c = 0; c < CB; ++c) P[0][c] = P[1][c] = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int k = 4 * run; k < 4 * run + 4; ++k) {
            __m256i A[2];
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h)
              A[h] = q5_codes(k, simd::load256(bc + 64 + 64 * (k % 4) + 32 * h), hb[h]);
            add_pair_sums<CB>(A, xr, static_cast<size_t>(32 * b + 4 * k), P);
          }
#pragma GCC unroll 16
          for (int c = 0; c < CB; ++c) {
            const __m256i w0 = _mm256_madd_epi16(P[0][c], ones);
            const __m256i w1 = _mm256_madd_epi16(P[1][c], ones);
            I[0][c] = run == 0 ? w0 : _mm256_add_epi32(I[0][c], w0);
            I[1][c] = run == 0 ? w1 : _mm256_add_epi32(I[1][c], w1);
          }
        }
      } else {
        // Signed weights (Q8_0: the codes again; IQ4_NL: the nibbles looked
        // up in the value table), multiplied as add_signed_products does.
        const __m256i ones2[2] = {ones, ones};
#pragma GCC unroll 16
        for (int c = 0; c < CB; ++c) I[0][c] = I[1][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          __m256i W[2];
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h)
            W[h] = Traits<T>::kTable ? iq4_values(simd::load256(bc + 64 * (k % 4) + 32 * h), k,
                                                  Traits<T>::kValues)
                                     : _mm256_xor_si256(simd::load256(bc + 64 * k + 32 * h),
                                                        _mm256_set1_epi8(-128));
          add_signed_products<CB>(W, xr, static_cast<size_t>(32 * b + 4 * k), ones2, I);
        }
      }
      const __m256 dw0 = scales8(sc, 0), dw1 = scales8(sc, 1);
      [[maybe_unused]] __m256 mw0, mw1;  // the mins (Q4_1, Q5_1)
      if constexpr (Traits<T>::kMin) {
        mw0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 32)));
        mw1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 48)));
      }
#pragma GCC unroll 16
      for (int c = 0; c < CB; ++c) {
        const __m256i off = _mm256_set1_epi32(-Traits<T>::kOffset * xr[c].sum[b]);
        const __m256 dx = _mm256_set1_ps(xr[c].d[b]);
        if constexpr (!kSigned && !Traits<T>::kMin) {
          I[0][c] = _mm256_add_epi32(I[0][c], off);
          I[1][c] = _mm256_add_epi32(I[1][c], off);
        }
        acc[0][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[0][c]), _mm256_mul_ps(dw0, dx), acc[0][c]);
        acc[1][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[1][c]), _mm256_mul_ps(dw1, dx), acc[1][c]);
        if constexpr (Traits<T>::kMin) {
          const __m256 sx = _mm256_set1_ps(static_cast<float>(xr[c].sum[b]));
          acc[0][c] = _mm256_fmadd_ps(sx, _mm256_mul_ps(mw0, dx), acc[0][c]);
          acc[1][c] = _mm256_fmadd_ps(sx, _mm256_mul_ps(mw1, dx), acc[1][c]);
        }
      }
    };
    // Blocks go in pairs (codes, codes, scales, scales): walking the pairs
    // with a pointer spares the per-block offset arithmetic.
    const uint8_t* p = codes;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2, p += 2 * C + 2 * S) {
      block(b, p, p + 2 * C);
      block(b + 1, p + C, p + 2 * C + S);
    }
    if (b < nb) block(b, p, p + C);
    store_rows8x2<CB>(out, os, acc, valid);
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

template <DType T>
PackedTileFn packed_for(CpuIsa isa) {
  return pick_packed<PAGELLM_IF_AMX(Amx<T, EmuTiles>), PAGELLM_IF_AMX(Amx<T, HwTiles>),
                     PAGELLM_IF_AVX512(Avx512<T>), PAGELLM_IF_AVX2(Avx2<T>)>(isa,
                                                                              packed_scalar<T>);
}

// f.operator()<T>() for the block formats of this file (Formats); nullptr for
// others.
template <DType... Formats, class F>
PackedTileFn for_format_in(DType wtype, F& f) {
  PackedTileFn fn = nullptr;
  ((wtype == Formats ? (void)(fn = f.template operator()<Formats>()) : void()), ...);
  return fn;
}
template <class F>
PackedTileFn for_block_format(DType wtype, F&& f) {
  return for_format_in<DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                       DType::IQ4_NL, DType::MXFP4>(wtype, f);
}

}  // namespace

PackedTileFn packed_amx_fn(DType wtype, bool emulated) {
  if (!isa_available(CpuIsa::Avx512) || (!emulated && !amx_int8_available())) return nullptr;
  if (wtype == DType::IQ4_XS) return packed_iq4xs_amx_fn(emulated);
  if (PackedTileFn fn = for_block_format(wtype, [&]<DType T>() {
        return pick_amx<PAGELLM_IF_AMX(Amx<T, EmuTiles>), PAGELLM_IF_AMX(Amx<T, HwTiles>)>(
            emulated);
      }))
    return fn;
  return packed_k_amx_fn(wtype, emulated);
}

PackedTileFn packed_tile_fn(DType wtype, CpuIsa isa) {
  switch (wtype) {
    case DType::Q4_K:
      return packed_q4k_fn(isa);
    case DType::Q5_K:
      return packed_q5k_fn(isa);
    case DType::Q6_K:
      return packed_q6k_fn(isa);
    case DType::Q2_K:
      return packed_q2k_fn(isa);
    case DType::Q3_K:
      return packed_q3k_fn(isa);
    case DType::IQ4_XS:
      return packed_iq4xs_fn(isa);
    case DType::F16:
    case DType::BF16:
      return packed_float_fn(wtype, isa);
    default:
      return for_block_format(wtype, [&]<DType T>() { return packed_for<T>(isa); });
  }
}

}  // namespace pagellm::cpu::detail
