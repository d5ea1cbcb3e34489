// SIMD feature selection and small helpers shared by the kernels. Internal to
// backend/cpu.
//
// With GCC on x86-64 every variant is compiled into one binary whatever the
// build's -march: each variant's code sits between PAGELLM_TARGET_AVX2 (or
// _AVX512) and PAGELLM_TARGET_END, which compile it for that instruction set
// only (`#pragma GCC target`), and cpu_isa.h picks the best variant the CPU
// runs at start-up. Templates take their instruction set from where they are
// defined, so a template instantiated for a variant must be defined inside
// that variant's region. Other compilers get the variants the build's flags
// enable, chosen at compile time.
#pragma once

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define PAGELLM_ISA_DISPATCH 1
#define PAGELLM_HAVE_AVX2 1
#define PAGELLM_HAVE_AVX512 1
// clang-format off
#define PAGELLM_TARGET_AVX2 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,popcnt\")")
#define PAGELLM_TARGET_AVX512 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni\")")
#define PAGELLM_TARGET_AMX _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni,amx-tile,amx-int8\")")
// clang-format on
// PAGELLM_TARGET_AMX: the AVX-512 set plus AMX tiles (only for code that runs
// after amx_tiles.h said the CPU and the OS have them).
#define PAGELLM_HAVE_AMX 1
#define PAGELLM_TARGET_END _Pragma("GCC pop_options")
#else
#define PAGELLM_ISA_DISPATCH 0
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define PAGELLM_HAVE_AVX2 1
#else
#define PAGELLM_HAVE_AVX2 0
#endif
#if PAGELLM_HAVE_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define PAGELLM_HAVE_AVX512 1
#else
#define PAGELLM_HAVE_AVX512 0
#endif
#define PAGELLM_HAVE_AMX 0
#define PAGELLM_TARGET_AVX2
#define PAGELLM_TARGET_AVX512
#define PAGELLM_TARGET_AMX
#define PAGELLM_TARGET_END
#endif

namespace pagellm::cpu::simd {
// Software prefetch of weights: the kernels interleave a few rows at a time,
// short streams the hardware prefetcher does not follow well, so each kernel
// hints the same offset kPrefetchGroups row groups ahead into L2 (prefetcht1).
// Measured on Zen 4 (single-thread Q4_K GEMV from DRAM): no hint 5.5 GB/s,
// L1 hint 10 GB/s, L2 hint 4 groups ahead 19 GB/s. A hint past the end of the
// matrix is harmless. Always inlined, with no target of its own (any build,
// any variant; locality 2 is prefetcht1 on x86): GCC deems a function that
// only prefetches free of side effects and deletes a call to it that stays
// out of line, so the hint would silently vanish. Helpers that loop over hints
// are always inlined too (the exception to the region rule above).
constexpr int kPrefetchGroups = 4;
inline __attribute__((always_inline)) void prefetch(const void* p) {
  __builtin_prefetch(p, 0, 2);
}
}  // namespace pagellm::cpu::simd

#if PAGELLM_HAVE_AVX2
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own
// "undefined" placeholders (fixed in GCC 13); silence it for the header only.
// Include this file before anything else that includes <immintrin.h>.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

PAGELLM_TARGET_AVX2
// lanes.h's Lanes of 8 floats, here for exp8.
namespace pagellm::cpu::lanes::avx2 {
struct Lanes {
  using T = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kTile = 2;  // 16 ymm registers: 4 rows x 2 + loads
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T set1(float v) { return _mm256_set1_ps(v); }
  static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T fnma(T a, T b, T c) { return _mm256_fnmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T div(T a, T b) { return _mm256_div_ps(a, b); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T clamp(T x, T lo, T hi) { return _mm256_min_ps(_mm256_max_ps(x, lo), hi); }
  static T round(T x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static T ge(T a, T b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  static T select(T m, T v) { return _mm256_and_ps(v, m); }
  static T pow2(T n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static T exp(T x);  // = simd::exp8
};
#include "backend/cpu/lanes_exp.inc"
}  // namespace pagellm::cpu::lanes::avx2

namespace pagellm::cpu::simd {

// Sum of the 8 lanes in a fixed order: (lo128 + hi128), then pairs.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// Max of the 8 lanes, in hsum's order.
inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// exp(x) for 8 floats: lanes_exp.inc's exp_flush (the reduction and
// polynomial of exp16 below; inputs below -87.3 give 0, above 88 give
// exp(88); softmax only passes x <= 0).
inline __m256 exp8(__m256 x) { return lanes::avx2::exp_flush(x); }

// tanh(x) for 8 floats (attention's score soft cap), relative error ~3e-7:
// |x| < 0.5 by its Taylor series through x^19 (terms shrink by (x / (pi/2))^2
// <= 0.1 each), else (1 - e) / (1 + e), e = exp8(-2|x|), where 1 - e loses no
// more than a bit; the sign copied back. The AVX-512 kernels use it on halves,
// so a capped score is the same bits on either variant.
inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 z = _mm256_mul_ps(x, x);
  // Coefficients of x^(2k+1), k = 9 .. 1: 2^(2k+2) (2^(2k+2) - 1) B_(2k+2) / (2k+2)!.
  __m256 p = _mm256_set1_ps(-443861162.0f / 1856156927625.0f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(6404582.0f / 10854718875.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-929569.0f / 638512875.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(21844.0f / 6081075.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-1382.0f / 155925.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(62.0f / 2835.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-17.0f / 315.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.0f / 15.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-1.0f / 3.0f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  const __m256 e = exp8(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 large = _mm256_or_ps(_mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e)),
                                    _mm256_and_ps(x, sign));
  return _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
}

inline float load_f16(const void* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// The f16 at p, converted and broadcast to 8 lanes.
inline __m256 bcast_f16(const void* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Makes v a register value at this point. In k-outer integer loops GCC
// otherwise computes a whole block's products first, spills them, and adds
// them up afterwards (AVX2 has 16 registers); pinning the accumulators after
// each k keeps every product next to its add.
inline void pin(__m256i& v) {
  __asm__("" : "+x"(v));
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}

// acc + (per 32-bit lane) sum of the four products u8(u) * s8(s). With VNNI one
// instruction; without, maddubs + madd. The u*s pair sums must fit in int16
// (|u| * 127 * 2 <= 32767, true for every caller: u <= 128).
template <bool kVnni>
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
  static_assert(!kVnni, "the VNNI form is specialised in the AVX-512 region below");
  __m256i p = _mm256_maddubs_epi16(u, s);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

// acc + (per 32-bit lane) sum of the two products of int16 pairs a * b.
template <bool kVnni>
inline __m256i dot_s16(__m256i acc, __m256i a, __m256i b) {
  static_assert(!kVnni, "the VNNI form is specialised in the AVX-512 region below");
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}

// Byte i of the result = byte i of `value` where bit i of `bits` is set, else 0.
// (kAvx512: one masked move.)
template <bool kAvx512>
inline __m256i bytes_from_bits(uint32_t bits, __m256i value) {
  static_assert(!kAvx512, "the AVX-512 form is specialised in the AVX-512 region below");
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  __m256i t = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)), spread);
  t = _mm256_cmpeq_epi8(_mm256_and_si256(t, bit), bit);
  return _mm256_and_si256(t, value);
}

}  // namespace pagellm::cpu::simd

namespace pagellm::cpu::lanes::avx2 {
inline Lanes::T Lanes::exp(T x) { return simd::exp8(x); }
}  // namespace pagellm::cpu::lanes::avx2
PAGELLM_TARGET_END

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// lanes.h's Lanes of 16 floats, here for exp16.
namespace pagellm::cpu::lanes::avx512 {
struct Lanes {
  using T = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kTile = 4;  // 32 zmm registers: 4 rows x 4 + loads
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T set1(float v) { return _mm512_set1_ps(v); }
  static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T fnma(T a, T b, T c) { return _mm512_fnmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T div(T a, T b) { return _mm512_div_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T clamp(T x, T lo, T hi) { return _mm512_min_ps(_mm512_max_ps(x, lo), hi); }
  static T round(T x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static __mmask16 ge(T a, T b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static T select(__mmask16 m, T v) { return _mm512_maskz_mov_ps(m, v); }
  static T pow2(T n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  // lanes_exp.inc's exp_flush (exp8's operations, 16 lanes at once).
  static T exp(T x);
};
#include "backend/cpu/lanes_exp.inc"
inline Lanes::T Lanes::exp(T x) { return exp_flush(x); }
}  // namespace pagellm::cpu::lanes::avx512

namespace pagellm::cpu::simd {

// acc + dot of u's unsigned bytes with the four signed bytes at p repeated in
// every lane (vpdpbusd with an embedded {1to16} broadcast: GCC loads the
// broadcast into a register first, one more uop per product; the Q4_0 16-
// column tile runs 2-5% faster this way).
inline __m512i dpbusd_bcast(__m512i acc, __m512i u, const int8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0"
      : "+v"(acc)
      : "v"(u), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

template <>
inline __m256i dot_u8s8<true>(__m256i acc, __m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(acc, u, s);
}

template <>
inline __m256i dot_s16<true>(__m256i acc, __m256i a, __m256i b) {
  return _mm256_dpwssd_epi32(acc, a, b);
}

template <>
inline __m256i bytes_from_bits<true>(uint32_t bits, __m256i value) {
  return _mm256_maskz_mov_epi8(static_cast<__mmask32>(bits), value);
}

// exp(x) for 16 floats: lanes_exp.inc's reduction and polynomial, times 2^n
// by vscalefps. exp(-inf) = 0; inputs above 88.7 give exp(88.7).
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // below: result 0 (denormal flush)
  x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
  __m512 n;
  const __m512 p = lanes::avx512::exp_reduced(x, n);
  return _mm512_scalef_ps(p, n);
}

inline float hsum(__m512 v) {
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), hi));
}
}  // namespace pagellm::cpu::simd
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512
#endif  // PAGELLM_HAVE_AVX2
