// Dot products of weight rows with one or more activation rows, for every
// weight type the CPU backend supports: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4.
//
// Weight rows are in the weight type's block layout (tensor/blocks.h), n
// elements each, consecutive rows `w_row_stride` bytes apart. Activation rows
// are in the dot type of the weight type (activation_quant.h). Quantized
// types are multiplied block by block in integer arithmetic (weights are never
// expanded to floats); F16/BF16 weights are widened to f32 on the fly.
//
// Batch invariance: within one CpuIsa, the value of out for a (weight row,
// activation row) pair does not depend on how many rows or columns are
// computed together, on their positions, or on the caller's threading.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_isa.h"
#include "tensor/dtype.h"

namespace pagellm::cpu {

// True if vec_dot_rows/vec_dot_tile handle weights of this type.
bool dot_supported(DType wtype);

// out[r] = dot(weight row r, x_act) for r < rows.
void vec_dot_rows(DType wtype, int64_t n, const void* w, size_t w_row_stride, int64_t rows,
                  const void* x_act, float* out, CpuIsa isa = best_isa());

// out[c * out_col_stride + r] = dot(weight row r, activation row c) for r < rows,
// c < cols; activation rows are x_row_stride bytes apart. Bit-identical to
// vec_dot_rows for every pair.
void vec_dot_tile(DType wtype, int64_t n, const void* w, size_t w_row_stride, int64_t rows,
                  const void* x_act, size_t x_row_stride, int64_t cols, float* out,
                  int64_t out_col_stride, CpuIsa isa = best_isa());

}  // namespace pagellm::cpu
