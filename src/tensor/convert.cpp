// Row conversion dispatch, and the float formats (F32, F16, BF16).
#include "tensor/convert.h"

#include <cstring>
#include <string>

#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quant_internal.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace pagellm {

bool cpu_has_f16c() {
  const CpuFeatures& f = cpu_features();
  return f.ymm_state && f.avx && f.f16c;
}

namespace {

#if PAGELLM_F16C_PATH
__attribute__((target("avx,f16c"))) void f16_to_f32_row_f16c(const uint16_t* x, float* y,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}

__attribute__((target("avx,f16c"))) void f32_to_f16_row_f16c(const float* x, uint16_t* y,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
#endif

void f16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
#if PAGELLM_F16C_PATH
  if (cpu_has_f16c()) return f16_to_f32_row_f16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
#if PAGELLM_F16C_PATH
  if (cpu_has_f16c()) return f32_to_f16_row_f16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}

void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

// Returns the number of blocks in a row of n elements; throws Error when n is
// negative or not a whole number of blocks.
int64_t row_blocks(const DTypeTraits& tr, int64_t n) {
  if (n < 0 || n % tr.block_size != 0)
    throw Error("row of " + std::to_string(n) + " elements is not a whole number of " + tr.name +
                " blocks (" + std::to_string(tr.block_size) + " elements each)");
  return n / tr.block_size;
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  using namespace detail;
  const int64_t nb = row_blocks(dtype_traits(type), n);
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      f16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::BF16:
      bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::Q4_0:
      dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
      return;
    case DType::Q4_1:
      dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
      return;
    case DType::Q5_0:
      dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
      return;
    case DType::Q5_1:
      dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
      return;
    case DType::Q8_0:
      dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
      return;
    case DType::Q8_1:
      dequantize_q8_1(static_cast<const BlockQ8_1*>(src), dst, nb);
      return;
    case DType::Q2_K:
      dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, nb);
      return;
    case DType::Q3_K:
      dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, nb);
      return;
    case DType::Q4_K:
      dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
      return;
    case DType::Q5_K:
      dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
      return;
    case DType::Q6_K:
      dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
      return;
    case DType::Q8_K:
      dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb);
      return;
    case DType::IQ4_NL:
      dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, nb);
      return;
    case DType::IQ4_XS:
      dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, nb);
      return;
    case DType::MXFP4:
      dequantize_mxfp4(static_cast<const BlockMXFP4*>(src), dst, nb);
      return;
  }
  throw Error("dequantize_row: unsupported type " + std::string(dtype_name(type)));
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  using namespace detail;
  const DTypeTraits& tr = dtype_traits(type);
  if (!tr.can_quantize) throw Error(std::string("cannot quantize to ") + tr.name);
  const int64_t nb = row_blocks(tr, n);
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      f32_to_f16_row(src, static_cast<uint16_t*>(dst), n);
      return;
    case DType::BF16:
      f32_to_bf16_row(src, static_cast<uint16_t*>(dst), n);
      return;
    case DType::Q4_0:
      quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
      return;
    case DType::Q4_1:
      quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
      return;
    case DType::Q5_0:
      quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
      return;
    case DType::Q5_1:
      quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
      return;
    case DType::Q8_0:
      quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
      return;
    case DType::Q8_1:
      quantize_q8_1(src, static_cast<BlockQ8_1*>(dst), nb);
      return;
    case DType::Q2_K:
      quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), nb);
      return;
    case DType::Q3_K:
      quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), nb);
      return;
    case DType::Q4_K:
      quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
      return;
    case DType::Q5_K:
      quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), nb);
      return;
    case DType::Q6_K:
      quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), nb);
      return;
    case DType::Q8_K:
      quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), nb);
      return;
    case DType::IQ4_NL:
      quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), nb);
      return;
    case DType::IQ4_XS:
      quantize_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), nb);
      return;
    case DType::MXFP4:
      quantize_mxfp4(src, static_cast<BlockMXFP4*>(dst), nb);
      return;
  }
  throw Error("quantize_row: unsupported type " + std::string(dtype_name(type)));
}

}  // namespace pagellm
