// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights times Q8_K activations, AVX2 and
// AVX-512 VNNI. A 256-element super-block is handled as 8 chunks of 32
// elements (one 256-bit register of weight codes u, unsigned). Per super-block
// and (weight row, activation row) pair:
//   L    = int32 lanes: start value (below), then for each chunk k in order
//          L += pair sums of maddubs(u_k, q_x) times the sub-block scales
//   Q2_K, Q4_K, Q5_K (x = d * sc * u - dmin * m):
//          acc = fma(float(madd(bsums, mins)), broadcast(-(dmin * d_x)), acc)
//          before the chunks, L starting at 0
//   Q3_K, Q6_K (x = d * sc * (u - offset), offset 4 / 32):
//          L starts at -offset * madd(bsums, scales)
//   acc  = fma(float(L), broadcast(d * d_x), acc)
// and the output is simd::hsum(acc). Integer steps are exact, so AVX2 (madd)
// and VNNI (dpwssd) variants agree bit for bit.
#include <cstring>
#include <utility>

#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/simd.h"
#include "tensor/blocks.h"

namespace pagellm::cpu::detail {

#if PAGELLM_HAVE_AVX2
namespace {

using simd::load128;
using simd::load256;
using simd::load_f16;
using simd::load_u32;

// Shuffle control that broadcasts int16 word k of each 128-bit half.
template <int k>
inline __m256i word_ctrl() {
  return _mm256_set1_epi16(static_cast<short>((2 * k) | ((2 * k + 1) << 8)));
}

// 16 per-sub-block values (bytes, sub-blocks of 16 elements) -> a register whose
// low half holds the even-indexed ones and high half the odd-indexed ones as
// int16, so word_ctrl<k> yields {v[2k] x8, v[2k+1] x8}: the scales of chunk k.
template <bool kSigned>
inline __m256i pair_scales(__m128i v) {
  const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  __m128i t = _mm_shuffle_epi8(v, even_odd);
  return kSigned ? _mm256_cvtepi8_epi16(t) : _mm256_cvtepu8_epi16(t);
}

// Decoded per-row, per-super-block state.
struct Row {
  __m256i scales;  // shuffled by word_ctrl<k> for chunk k
  __m256i corr;    // int16 per bsum: mins (Q2/4/5_K) or signed scales (Q3/6_K)
  float d, dmin;
};

// Q4_K/Q5_K: 8 scales and 8 mins of 6 bits packed in 12 bytes.
inline void k4_scales(const uint8_t* s, __m256i& scales, __m256i& mins16) {
  uint32_t a0 = load_u32(s), a1 = load_u32(s + 4), a2 = load_u32(s + 8);
  uint32_t sc_lo = a0 & 0x3f3f3f3f, sc_hi = (a2 & 0x0f0f0f0f) | ((a0 >> 2) & 0x30303030);
  uint32_t mn_lo = a1 & 0x3f3f3f3f, mn_hi = ((a2 >> 4) & 0x0f0f0f0f) | ((a1 >> 2) & 0x30303030);
  __m128i sc =
      _mm_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), 0, 0));
  scales = _mm256_broadcastsi128_si256(sc);  // chunk k = sub-block k
  __m128i mn = _mm_setr_epi32(static_cast<int>(mn_lo), static_cast<int>(mn_hi), 0, 0);
  mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn, mn));  // each min covers 2 bsums
}

struct Q2K {
  using Block = BlockQ2_K;
  static constexpr bool kHasMin = true;
  static constexpr int kOffsetShift = 0;
  static Row row(const Block* b) {
    __m128i v = load128(b->scales);
    __m128i m4 = _mm_set1_epi8(15);
    return {pair_scales<false>(_mm_and_si128(v, m4)),
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), m4)), load_f16(&b->d),
            load_f16(&b->dmin)};
  }
  template <int k>
  static __m256i codes(const Block* b) {
    __m256i q = load256(b->qs + 32 * (k / 4));
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * (k % 4)), _mm256_set1_epi8(3));
  }
};

struct Q3K {
  using Block = BlockQ3_K;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 2;  // offset 4
  static Row row(const Block* b) {
    uint32_t a0 = load_u32(b->scales), a1 = load_u32(b->scales + 4), a2 = load_u32(b->scales + 8);
    uint32_t s0 = (a0 & 0x0f0f0f0f) | ((a2 & 0x03030303) << 4);
    uint32_t s1 = (a1 & 0x0f0f0f0f) | (((a2 >> 2) & 0x03030303) << 4);
    uint32_t s2 = ((a0 >> 4) & 0x0f0f0f0f) | (((a2 >> 4) & 0x03030303) << 4);
    uint32_t s3 = ((a1 >> 4) & 0x0f0f0f0f) | (((a2 >> 6) & 0x03030303) << 4);
    __m128i v = _mm_sub_epi8(_mm_setr_epi32(static_cast<int>(s0), static_cast<int>(s1),
                                            static_cast<int>(s2), static_cast<int>(s3)),
                             _mm_set1_epi8(32));
    return {pair_scales<true>(v), _mm256_cvtepi8_epi16(v), load_f16(&b->d), 0.0f};
  }
  template <int k>
  static __m256i codes(const Block* b) {
    constexpr int bit = k;  // high bit of chunk k is bit k of hmask[l]
    __m256i q = load256(b->qs + 32 * (k / 4));
    __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (k % 4)), _mm256_set1_epi8(3));
    __m256i hm = load256(b->hmask);
    __m256i hb = bit <= 2 ? _mm256_slli_epi16(hm, 2 - bit) : _mm256_srli_epi16(hm, bit - 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi8(4)));
  }
};

struct Q4K {
  using Block = BlockQ4_K;
  static constexpr bool kHasMin = true;
  static constexpr int kOffsetShift = 0;
  static Row row(const Block* b) {
    Row r;
    k4_scales(b->scales, r.scales, r.corr);
    r.d = load_f16(&b->d);
    r.dmin = load_f16(&b->dmin);
    return r;
  }
  template <int k>
  static __m256i codes(const Block* b) {
    __m256i q = load256(b->qs + 32 * (k / 2));
    if constexpr (k % 2) q = _mm256_srli_epi16(q, 4);
    return _mm256_and_si256(q, _mm256_set1_epi8(15));
  }
};

struct Q5K {
  using Block = BlockQ5_K;
  static constexpr bool kHasMin = true;
  static constexpr int kOffsetShift = 0;
  static Row row(const Block* b) {
    Row r;
    k4_scales(b->scales, r.scales, r.corr);
    r.d = load_f16(&b->d);
    r.dmin = load_f16(&b->dmin);
    return r;
  }
  template <int k>
  static __m256i codes(const Block* b) {
    __m256i q = load256(b->qs + 32 * (k / 2));
    if constexpr (k % 2) q = _mm256_srli_epi16(q, 4);
    q = _mm256_and_si256(q, _mm256_set1_epi8(15));
    __m256i h = load256(b->qh);  // bit k of qh[l] is the high bit of chunk k
    h = k <= 4 ? _mm256_slli_epi16(h, 4 - k) : _mm256_srli_epi16(h, k - 4);
    return _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(16)));
  }
};

struct Q6K {
  using Block = BlockQ6_K;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 5;  // offset 32
  static Row row(const Block* b) {
    __m128i v = load128(b->scales);
    return {pair_scales<true>(v), _mm256_cvtepi8_epi16(v), load_f16(&b->d), 0.0f};
  }
  template <int k>
  static __m256i codes(const Block* b) {
    constexpr int half = k / 4, part = k % 4;
    __m256i l = load256(b->ql + 64 * half + 32 * (part % 2));
    if constexpr (part >= 2) l = _mm256_srli_epi16(l, 4);
    l = _mm256_and_si256(l, _mm256_set1_epi8(15));
    __m256i h = load256(b->qh + 32 * half);  // bits 2*part, 2*part+1 -> bits 4, 5
    constexpr int s = 2 * part;
    h = s <= 4 ? _mm256_slli_epi16(h, 4 - s) : _mm256_srli_epi16(h, s - 4);
    return _mm256_or_si256(l, _mm256_and_si256(h, _mm256_set1_epi8(0x30)));
  }
};

template <class T, bool kVnni>
struct KQuantKern {
  static constexpr int kRows = 2, kCols = PAGELLM_HAVE_AVX512 ? 4 : 2, kGemvRows = 4;
  using Block = typename T::Block;

  template <int RB, int CB>
  static void micro(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out,
                    int64_t os) {
    __m256 acc[RB][CB];
    for (int r = 0; r < RB; ++r)
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_setzero_ps();
    const int64_t nb = n / QK_K;
    for (int64_t b = 0; b < nb; ++b) {
      const Block* wb[RB];
      const BlockQ8_K* xb[CB];
      for (int r = 0; r < RB; ++r) wb[r] = reinterpret_cast<const Block*>(w + r * ws) + b;
      for (int c = 0; c < CB; ++c) xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs) + b;

      Row row[RB];
      for (int r = 0; r < RB; ++r) {
        const uint8_t* next =
            reinterpret_cast<const uint8_t*>(wb[r]) + simd::kPrefetchGroups * RB * ws;
        for (size_t off = 0; off < sizeof(Block); off += 64) simd::prefetch(next + off);
        row[r] = T::row(wb[r]);
      }
      __m256i L[RB][CB];
      for (int c = 0; c < CB; ++c) {
        const __m256i bsums = load256(xb[c]->bsums);
        for (int r = 0; r < RB; ++r) {
          __m256i m = _mm256_madd_epi16(bsums, row[r].corr);
          if constexpr (T::kHasMin) {
            acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m),
                                        _mm256_set1_ps(-(row[r].dmin * xb[c]->d)), acc[r][c]);
            L[r][c] = _mm256_setzero_si256();
          } else {
            L[r][c] =
                _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(m, T::kOffsetShift));
          }
        }
      }
      [&]<int... K>(std::integer_sequence<int, K...>) {
        (chunk<K, RB, CB>(wb, xb, row, L), ...);
      }
      (std::make_integer_sequence<int, 8>{});
      for (int r = 0; r < RB; ++r)
        for (int c = 0; c < CB; ++c)
          acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(L[r][c]),
                                      _mm256_set1_ps(row[r].d * xb[c]->d), acc[r][c]);
    }
    for (int r = 0; r < RB; ++r)
      for (int c = 0; c < CB; ++c) out[c * os + r] = simd::hsum(acc[r][c]);
  }

  template <int k, int RB, int CB>
  static inline __attribute__((always_inline)) void chunk(const Block* const (&wb)[RB],
                                                          const BlockQ8_K* const (&xb)[CB],
                                                          const Row (&row)[RB],
                                                          __m256i (&L)[RB][CB]) {
    __m256i y[CB];
    for (int c = 0; c < CB; ++c) y[c] = load256(xb[c]->qs + 32 * k);
    for (int r = 0; r < RB; ++r) {
      const __m256i u = T::template codes<k>(wb[r]);
      const __m256i sc = _mm256_shuffle_epi8(row[r].scales, word_ctrl<k>());
      for (int c = 0; c < CB; ++c)
        L[r][c] = simd::dot_s16<kVnni>(L[r][c], _mm256_maddubs_epi16(u, y[c]), sc);
    }
  }
};

template <bool kVnni>
DotTileFn kquant_table(DType wtype) {
  switch (wtype) {
    case DType::Q2_K:
      return run_tile<KQuantKern<Q2K, kVnni>>;
    case DType::Q3_K:
      return run_tile<KQuantKern<Q3K, kVnni>>;
    case DType::Q4_K:
      return run_tile<KQuantKern<Q4K, kVnni>>;
    case DType::Q5_K:
      return run_tile<KQuantKern<Q5K, kVnni>>;
    case DType::Q6_K:
      return run_tile<KQuantKern<Q6K, kVnni>>;
    default:
      return nullptr;
  }
}

}  // namespace
#endif  // PAGELLM_HAVE_AVX2

DotTileFn kquant_dot_tile(DType wtype, CpuIsa isa) {
#if PAGELLM_HAVE_AVX512
  if (isa == CpuIsa::Avx512) return kquant_table<true>(wtype);
#endif
#if PAGELLM_HAVE_AVX2
  if (isa == CpuIsa::Avx2) return kquant_table<false>(wtype);
#endif
  (void)wtype;
  (void)isa;
  return nullptr;
}

}  // namespace pagellm::cpu::detail
