// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights times Q8_0 / Q8_1 activations, AVX2 and
// AVX-512 VNNI. One 32-element block fills one 256-bit register. Per block and
// (weight row, activation row) pair:
//   lanes = exact int32 partial sums of q_w * q_x (lane i: elements 4i..4i+3)
//   acc   = fma(float(lanes), broadcast(d_w) * broadcast(d_x), acc)
//   acc   = fma(broadcast(m_w), {s_x, 0, ..., 0}, acc)       (Q4_1 / Q5_1 only)
// and the output is simd::hsum(acc). The integer lanes are exact, so the AVX2
// (maddubs) and VNNI (dpbusd) variants give bit-identical results.
//
// Unsigned weight codes (Q4_0: q in 0..15, x = d * (q - 8)) are multiplied as
// is and the offset removed with a per-activation-block correction
// -8 * (lane sums of q_x), which starts the lane accumulator.
#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/simd.h"
#include "tensor/blocks.h"

namespace pagellm::cpu::detail {

#if PAGELLM_HAVE_AVX2
namespace {

using simd::bcast_f16;
using simd::dot_u8s8;
using simd::load128;
using simd::load256;
using simd::load_f16;

// -offset * (sums of 4 consecutive int8 of y), per 32-bit lane.
template <bool kVnni>
inline __m256i neg_offset_sums(__m256i y, int offset) {
  __m256i s =
      dot_u8s8<kVnni>(_mm256_setzero_si256(), _mm256_set1_epi8(static_cast<char>(offset)), y);
  return _mm256_sub_epi32(_mm256_setzero_si256(), s);
}

// 32 nibbles: low nibbles of q[0..16) then high nibbles, as bytes 0..15.
// (Both halves hold q; the upper one is shifted right by 4.)
inline __m256i nibbles(const uint8_t* qs) {
  __m256i q = _mm256_broadcastsi128_si256(load128(qs));
  q = _mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(q, _mm256_set1_epi8(15));
}

struct ColQ8_0 {
  __m256i y, base;
  __m256 d;  // broadcast
};
struct ColQ8_1 {
  __m256i y;
  __m256 s;  // {s, 0, ..., 0}
  __m256 d;
};
struct Row {
  __m256i u;
  __m256 d, m;  // broadcast
};

// Offset activation (Q8_0) with unsigned weight codes q - kOffset.
template <bool kVnni, int kOffset>
inline ColQ8_0 col_q8_0(const uint8_t* x, int64_t b) {
  const auto* xb = reinterpret_cast<const BlockQ8_0*>(x) + b;
  ColQ8_0 c;
  c.y = load256(xb->qs);
  c.base = neg_offset_sums<kVnni>(c.y, kOffset);
  c.d = bcast_f16(&xb->d);
  return c;
}

inline ColQ8_1 col_q8_1(const uint8_t* x, int64_t b) {
  const auto* xb = reinterpret_cast<const BlockQ8_1*>(x) + b;
  ColQ8_1 c;
  c.y = load256(xb->qs);
  c.s = _mm256_setr_ps(load_f16(&xb->s), 0, 0, 0, 0, 0, 0, 0);
  c.d = bcast_f16(&xb->d);
  return c;
}

template <bool kVnni>
struct Q4_0 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  using Col = ColQ8_0;
  static constexpr bool kHasMin = false;
  static Col col(const uint8_t* x, int64_t b) { return col_q8_0<kVnni, 8>(x, b); }
  static Row row(const uint8_t* w, int64_t b) {
    const auto* wb = reinterpret_cast<const BlockQ4_0*>(w) + b;
    return {nibbles(wb->qs), bcast_f16(&wb->d), _mm256_setzero_ps()};
  }
  static __m256i lanes(const Row& r, const Col& c) { return dot_u8s8<kVnni>(c.base, r.u, c.y); }
};

template <bool kVnni>
struct Q5_0 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ5_0);
  using Col = ColQ8_0;
  static constexpr bool kHasMin = false;
  static Col col(const uint8_t* x, int64_t b) { return col_q8_0<kVnni, 16>(x, b); }
  static Row row(const uint8_t* w, int64_t b) {
    const auto* wb = reinterpret_cast<const BlockQ5_0*>(w) + b;
    __m256i hi = simd::bytes_from_bits(simd::load_u32(wb->qh), _mm256_set1_epi8(16));
    return {_mm256_or_si256(nibbles(wb->qs), hi), bcast_f16(&wb->d), _mm256_setzero_ps()};
  }
  static __m256i lanes(const Row& r, const Col& c) { return dot_u8s8<kVnni>(c.base, r.u, c.y); }
};

template <bool kVnni>
struct Q4_1 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_1);
  using Col = ColQ8_1;
  static constexpr bool kHasMin = true;
  static Col col(const uint8_t* x, int64_t b) { return col_q8_1(x, b); }
  static Row row(const uint8_t* w, int64_t b) {
    const auto* wb = reinterpret_cast<const BlockQ4_1*>(w) + b;
    return {nibbles(wb->qs), bcast_f16(&wb->d), bcast_f16(&wb->m)};
  }
  static __m256i lanes(const Row& r, const Col& c) {
    return dot_u8s8<kVnni>(_mm256_setzero_si256(), r.u, c.y);
  }
};

template <bool kVnni>
struct Q5_1 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ5_1);
  using Col = ColQ8_1;
  static constexpr bool kHasMin = true;
  static Col col(const uint8_t* x, int64_t b) { return col_q8_1(x, b); }
  static Row row(const uint8_t* w, int64_t b) {
    const auto* wb = reinterpret_cast<const BlockQ5_1*>(w) + b;
    __m256i hi = simd::bytes_from_bits(simd::load_u32(wb->qh), _mm256_set1_epi8(16));
    return {_mm256_or_si256(nibbles(wb->qs), hi), bcast_f16(&wb->d), bcast_f16(&wb->m)};
  }
  static __m256i lanes(const Row& r, const Col& c) {
    return dot_u8s8<kVnni>(_mm256_setzero_si256(), r.u, c.y);
  }
};

// Signed weights: VNNI multiplies (w + 128) and removes 128 * sum(y); AVX2
// multiplies |w| by y with w's sign (no int16 overflow: 128 * 127 * 2 < 2^15).
template <bool kVnni>
struct Q8_0 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  using Col = ColQ8_0;
  static constexpr bool kHasMin = false;
  static Col col(const uint8_t* x, int64_t b) {
    if constexpr (kVnni) return col_q8_0<true, 128>(x, b);
    const auto* xb = reinterpret_cast<const BlockQ8_0*>(x) + b;
    return {load256(xb->qs), _mm256_setzero_si256(), bcast_f16(&xb->d)};
  }
  static Row row(const uint8_t* w, int64_t b) {
    const auto* wb = reinterpret_cast<const BlockQ8_0*>(w) + b;
    return {load256(wb->qs), bcast_f16(&wb->d), _mm256_setzero_ps()};
  }
  static __m256i lanes(const Row& r, const Col& c) {
    if constexpr (kVnni)
      return dot_u8s8<true>(c.base, _mm256_xor_si256(r.u, _mm256_set1_epi8(-128)), c.y);
    return dot_u8s8<false>(_mm256_setzero_si256(), _mm256_abs_epi8(r.u),
                           _mm256_sign_epi8(c.y, r.u));
  }
};

template <class T>
struct LegacyKern {
  static constexpr int kRows = 4, kCols = PAGELLM_HAVE_AVX512 ? 4 : 2, kGemvRows = 4;

  template <int RB, int CB>
  static void micro(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out,
                    int64_t os) {
    __m256 acc[RB][CB];
    for (int r = 0; r < RB; ++r)
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_setzero_ps();
    const int64_t nb = n / 32;
    for (int64_t b = 0; b < nb; ++b) {
      typename T::Col col[CB];
      for (int c = 0; c < CB; ++c) col[c] = T::col(x + c * xs, b);
      for (int r = 0; r < RB; ++r) {
        simd::prefetch(w + (r + simd::kPrefetchGroups * RB) * ws + b * T::kBlockBytes);
        const Row row = T::row(w + r * ws, b);
        for (int c = 0; c < CB; ++c) {
          __m256 l = _mm256_cvtepi32_ps(T::lanes(row, col[c]));
          acc[r][c] = _mm256_fmadd_ps(l, _mm256_mul_ps(row.d, col[c].d), acc[r][c]);
          if constexpr (T::kHasMin) acc[r][c] = _mm256_fmadd_ps(row.m, col[c].s, acc[r][c]);
        }
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int c = 0; c < CB; ++c) out[c * os + r] = simd::hsum(acc[r][c]);
  }
};

template <bool kVnni>
DotTileFn legacy_table(DType wtype) {
  switch (wtype) {
    case DType::Q4_0:
      return run_tile<LegacyKern<Q4_0<kVnni>>>;
    case DType::Q4_1:
      return run_tile<LegacyKern<Q4_1<kVnni>>>;
    case DType::Q5_0:
      return run_tile<LegacyKern<Q5_0<kVnni>>>;
    case DType::Q5_1:
      return run_tile<LegacyKern<Q5_1<kVnni>>>;
    case DType::Q8_0:
      return run_tile<LegacyKern<Q8_0<kVnni>>>;
    default:
      return nullptr;
  }
}

}  // namespace
#endif  // PAGELLM_HAVE_AVX2

DotTileFn legacy_dot_tile(DType wtype, CpuIsa isa) {
#if PAGELLM_HAVE_AVX512
  if (isa == CpuIsa::Avx512) return legacy_table<true>(wtype);
#endif
#if PAGELLM_HAVE_AVX2
  if (isa == CpuIsa::Avx2) return legacy_table<false>(wtype);
#endif
  (void)wtype;
  (void)isa;
  return nullptr;
}

}  // namespace pagellm::cpu::detail
