// Whole-row conversion between float and any supported tensor type.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace pagellm {

// Rows must be aligned for their block type (dtype_alignment: 2 bytes for the
// types with f16 fields, 4 for Q8_K), as GgufFile guarantees for tensor data.

// dst[0..n) = values of the n elements at src (n a multiple of the block size).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Encodes n floats into `type` (reference-quality rounding). Throws Error for
// types that cannot be quantized (dtype_traits(type).can_quantize == false).
void quantize_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace pagellm
