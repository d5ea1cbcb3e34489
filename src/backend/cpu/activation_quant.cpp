#include "backend/cpu/activation_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/simd.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm::cpu {

DType dot_type(DType weight) {
  switch (weight) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return DType::F32;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::MXFP4:
      return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1:
      return DType::Q8_1;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
      return DType::Q8_K;
    default:
      break;
  }
  throw Error(std::string("no CPU dot product for weight type ") + dtype_name(weight));
}

size_t activation_row_bytes(DType weight, int64_t n) {
  DType t = dot_type(weight);
  if (n % dtype_block_size(weight) != 0)
    throw Error("row length " + std::to_string(n) + " is not a multiple of the " +
                dtype_name(weight) + " block size");
  return dtype_row_bytes(t, n);
}

namespace {

// ---- scalar ------------------------------------------------------------------

// round-half-even(v) as an int in [-127, 127] (v is finite in practice; NaN -> 0).
inline int8_t round_q(float v) {
  float r = std::nearbyint(v);
  if (r >= 127.0f) return 127;
  if (r <= -127.0f) return -127;
  return r == r ? static_cast<int8_t>(r) : 0;
}

// d for a Q8_0/Q8_1 block: amax / 127 rounded to f16; returns the f16 bits and
// sets id to 1 / (that rounded d) (0 for an all-zero block).
inline f16_t block_scale_f16(float amax, float& id) {
  f16_t dh = fp32_to_fp16(amax / 127.0f);
  float d = fp16_to_fp32(dh);
  id = d != 0.0f ? 1.0f / d : 0.0f;
  return dh;
}

// A block of 32 as Q8_0 and Q8_1 take it: its f16 d and codes; returns the
// codes' sum.
static_assert(QK8_0 == QK8_1);
inline int q8_block_scalar(const float* x, f16_t& d, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  float id;
  d = block_scale_f16(amax, id);
  int sum = 0;
  for (int j = 0; j < QK8_0; ++j) {
    qs[j] = round_q(x[j] * id);
    sum += qs[j];
  }
  return sum;
}

void quantize_scalar(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK8_0) q8_block_scalar(x, y[b].d, y[b].qs);
}

void quantize_scalar(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK8_1) {
    const int sum = q8_block_scalar(x, y[b].d, y[b].qs);
    y[b].s = fp32_to_fp16(fp16_to_fp32(y[b].d) * static_cast<float>(sum));
  }
}

void quantize_scalar(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    float amax = 0.0f;
    for (int j = 0; j < QK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = d;
    for (int j = 0; j < QK_K; ++j) y[b].qs[j] = round_q(x[j] * id);
    for (int g = 0; g < QK_K / 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += y[b].qs[16 * g + j];
      y[b].bsums[g] = static_cast<int16_t>(s);
    }
  }
}

// ---- AVX2 --------------------------------------------------------------------
#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2

inline __m256 abs8(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// max |x| over 32 floats.
inline float amax32_avx2(const float* x) {
  __m256 m =
      _mm256_max_ps(_mm256_max_ps(abs8(_mm256_loadu_ps(x)), abs8(_mm256_loadu_ps(x + 8))),
                    _mm256_max_ps(abs8(_mm256_loadu_ps(x + 16)), abs8(_mm256_loadu_ps(x + 24))));
  return simd::hmax(m);
}

// Rounds 32 floats * id to int8 (saturating at +-127 is never needed: |x*id|
// <= 127.2) and stores them in order; returns the 8-lane int32 partial sums.
inline __m256i round32_avx2(const float* x, float id, int8_t* q) {
  __m256 s = _mm256_set1_ps(id);
  __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), s));
  __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), s));
  __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), s));
  __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), s));
  __m256i sum = _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d));
  __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  __m256i v = _mm256_packs_epi16(ab, cd);
  v = _mm256_max_epi8(v, _mm256_set1_epi8(-127));
  v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), v);
  return sum;
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

void quantize_avx2(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK8_0) {
    float id;
    y[b].d = block_scale_f16(amax32_avx2(x), id);
    round32_avx2(x, id, y[b].qs);
  }
}

void quantize_avx2(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK8_1) {
    float id;
    y[b].d = block_scale_f16(amax32_avx2(x), id);
    int sum = hsum_i32(round32_avx2(x, id, y[b].qs));
    y[b].s = fp32_to_fp16(fp16_to_fp32(y[b].d) * static_cast<float>(sum));
  }
}

void quantize_avx2(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    float amax = 0.0f;
    for (int j = 0; j < QK_K; j += 32) amax = std::fmax(amax, amax32_avx2(x + j));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = d;
    for (int j = 0; j < QK_K; j += 32) round32_avx2(x + j, id, y[b].qs + j);
    for (int g = 0; g < QK_K / 16; ++g) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs + 16 * g));
      __m256i w = _mm256_cvtepi8_epi16(v);
      __m256i s = _mm256_madd_epi16(w, _mm256_set1_epi16(1));
      y[b].bsums[g] = static_cast<int16_t>(hsum_i32(s));
    }
  }
}

PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2

// ---- AVX-512 -----------------------------------------------------------------
#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512

inline float amax32_avx512(const float* x) {
  __m512 m =
      _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x)), _mm512_abs_ps(_mm512_loadu_ps(x + 16)));
  return _mm512_reduce_max_ps(m);  // max is exact in any order
}

// Rounds 16 floats * id into 16 int8 at q; returns their sum.
inline int round16_avx512(const float* x, __m512 id, int8_t* q) {
  __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), id));
  v = _mm512_max_epi32(v, _mm512_set1_epi32(-127));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(v));
  return _mm512_reduce_add_epi32(v);  // integer: exact in any order
}

void quantize_avx512(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK8_0) {
    float id;
    y[b].d = block_scale_f16(amax32_avx512(x), id);
    __m512 s = _mm512_set1_ps(id);
    round16_avx512(x, s, y[b].qs);
    round16_avx512(x + 16, s, y[b].qs + 16);
  }
}

void quantize_avx512(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK8_1) {
    float id;
    y[b].d = block_scale_f16(amax32_avx512(x), id);
    __m512 s = _mm512_set1_ps(id);
    int sum = round16_avx512(x, s, y[b].qs) + round16_avx512(x + 16, s, y[b].qs + 16);
    y[b].s = fp32_to_fp16(fp16_to_fp32(y[b].d) * static_cast<float>(sum));
  }
}

void quantize_avx512(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < QK_K; j += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    float d = _mm512_reduce_max_ps(m) / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = d;
    __m512 s = _mm512_set1_ps(id);
    for (int g = 0; g < QK_K / 16; ++g)
      y[b].bsums[g] = static_cast<int16_t>(round16_avx512(x + 16 * g, s, y[b].qs + 16 * g));
  }
}

PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

// The blocks B of a row by isa's variant (AVX2's for a vector variant without
// its own).
template <class B>
void quantize_blocks(const float* x, void* dst, int64_t nb, CpuIsa isa) {
  auto* y = static_cast<B*>(dst);
#if PAGELLM_HAVE_AVX512
  if (isa == CpuIsa::Avx512) return quantize_avx512(x, y, nb);
#endif
#if PAGELLM_HAVE_AVX2
  if (isa != CpuIsa::Scalar) return quantize_avx2(x, y, nb);
#endif
  quantize_scalar(x, y, nb);
}

}  // namespace

void quantize_activation_row(DType weight, const float* x, void* dst, int64_t n, CpuIsa isa) {
  DType t = dot_type(weight);
  if (n % dtype_block_size(t) != 0 || n % dtype_block_size(weight) != 0)
    throw Error("activation row length " + std::to_string(n) + " is not a multiple of the " +
                dtype_name(weight) + " block size");
  if (!isa_available(isa))
    throw Error(std::string("CPU variant not compiled in: ") + isa_name(isa));
  const int64_t nb = n / dtype_block_size(t);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::Q8_0:
      return quantize_blocks<BlockQ8_0>(x, dst, nb, isa);
    case DType::Q8_1:
      return quantize_blocks<BlockQ8_1>(x, dst, nb, isa);
    case DType::Q8_K:
      return quantize_blocks<BlockQ8_K>(x, dst, nb, isa);
    default:
      break;
  }
  throw Error("unreachable activation type");
}

namespace {

// The parts of a split row of n codes in blocks of `block`: the codes, a float
// d per block, then the blocks' sums; Error when n is not a multiple of block.
template <class Sum>
struct SplitRow {
  int8_t* qs;
  float* d;
  Sum* sums;
  int64_t blocks;
};
template <class Sum>
SplitRow<Sum> split_row(void* dst, int64_t n, int block) {
  if (n % block != 0)
    throw Error("activation row length " + std::to_string(n) + " is not a multiple of " +
                std::to_string(block));
  SplitRow<Sum> r;
  r.blocks = n / block;
  r.qs = static_cast<int8_t*>(dst);
  r.d = reinterpret_cast<float*>(r.qs + n);
  r.sums = reinterpret_cast<Sum*>(r.d + r.blocks);
  return r;
}

}  // namespace

size_t split_q8_0_row_bytes(int64_t n) {
  return static_cast<size_t>(n) + static_cast<size_t>(n / QK8_0) * 8;
}

void quantize_split_q8_0_row(const float* x, void* dst, int64_t n, CpuIsa isa) {
  const auto [qs, d, sum, nb] = split_row<int32_t>(dst, n, QK8_0);
  constexpr int64_t kChunk = 8;
  BlockQ8_0 tmp[kChunk];
  for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
    const int64_t m = std::min(kChunk, nb - b0);
    quantize_activation_row(DType::Q8_0, x + b0 * QK8_0, tmp, m * QK8_0, isa);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t b = b0 + i;
      std::memcpy(qs + b * QK8_0, tmp[i].qs, QK8_0);
      d[b] = fp16_to_fp32(tmp[i].d);
      int s = 0;
      for (int j = 0; j < QK8_0; ++j) s += tmp[i].qs[j];
      sum[b] = s;
    }
  }
}

size_t split_q8_k_row_bytes(int64_t n) {
  return static_cast<size_t>(n) + static_cast<size_t>(n / QK_K) * 52;
}

void quantize_split_q8_k_row(const float* x, void* dst, int64_t n, CpuIsa isa) {
  const auto [qs, d, sum32, nsb] = split_row<int16_t>(dst, n, QK_K);
  BlockQ8_K tmp;
  for (int64_t s = 0; s < nsb; ++s) {
    quantize_activation_row(DType::Q4_K, x + s * QK_K, &tmp, QK_K, isa);
    std::memcpy(qs + s * QK_K, tmp.qs, QK_K);
    d[s] = tmp.d;
    for (int j = 0; j < 8; ++j)
      sum32[8 * s + j] = static_cast<int16_t>(tmp.bsums[2 * j] + tmp.bsums[2 * j + 1]);
    std::memcpy(sum32 + 8 * nsb + 16 * s, tmp.bsums, sizeof tmp.bsums);
  }
}

}  // namespace pagellm::cpu
