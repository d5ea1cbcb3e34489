// A weight matrix as every backend takes it: n_out rows of n_in elements of
// one type, row-major in the file's block layout (Rows), or repacked 16 rows
// at a time for the CPU kernels (Rows16, backend/cpu/packed_weights.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace pagellm {

enum class WeightLayout { Rows, Rows16 };

// Rows in one unit of row_stride bytes (Rows: a row; Rows16: a 16-row group).
constexpr int64_t layout_rows(WeightLayout l) {
  return l == WeightLayout::Rows16 ? 16 : 1;
}

struct MatrixView {
  DType type = DType::F32;
  int64_t n_in = 0;   // elements per row (the reduction dimension)
  int64_t n_out = 0;  // rows
  const void* data = nullptr;
  // Rows: bytes between row starts (>= dtype_row_bytes(type, n_in)).
  // Rows16: the bytes of one 16-row group.
  size_t row_stride = 0;
  WeightLayout layout = WeightLayout::Rows;
  // Bytes of the whole matrix (a last partial group counts whole).
  size_t bytes() const {
    const int64_t g = layout_rows(layout);
    return static_cast<size_t>((n_out + g - 1) / g) * row_stride;
  }
};

}  // namespace pagellm
