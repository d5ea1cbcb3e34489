// Internal kernel table of backend/cpu: one "tile" function per (weight type,
// instruction-set variant). A tile function computes
//   out[c * out_stride + r] = dot(weight row r, activation row c)
// for r < rows, c < cols, where weight row r starts at w + r * w_stride and
// activation row c (already in the weight type's dot type, see
// activation_quant.h) at x + c * x_stride; n is the row length in elements.
//
// Every tile function computes each output with the same operation sequence
// whatever rows/cols/position are (batch invariance).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_isa.h"
#include "tensor/dtype.h"

namespace pagellm::cpu::detail {

using DotTileFn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows,
                           const uint8_t* x, size_t x_stride, int64_t cols, float* out,
                           int64_t out_stride);

// The tile function for (wtype, isa); throws Error if the type has no CPU dot
// product, the variant is not compiled in, or n is not a multiple of the
// type's block size.
DotTileFn dot_tile_fn(DType wtype, int64_t n, CpuIsa isa);

// nullptr when the variant does not handle the type (or is not compiled in).
DotTileFn scalar_dot_tile(DType wtype);
DotTileFn float_dot_tile(DType wtype, CpuIsa isa);   // F32, F16, BF16; Avx2/Avx512
DotTileFn legacy_dot_tile(DType wtype, CpuIsa isa);  // Q4_0..Q8_0, IQ4_NL, MXFP4; Avx2/Avx512
DotTileFn kquant_dot_tile(DType wtype, CpuIsa isa);  // Q2_K..Q6_K, IQ4_XS; Avx2/Avx512

// Rows16 weights (packed_weights.h) times split Q8_0 activation rows
// (activation_quant.h): out[c * out_stride + r] for r < rows, c < cols, where
// w is the first 16-row group (groups group_bytes apart) and row r counts from
// it; x rows are x_stride bytes apart. nullptr when (wtype, isa) has none.
using PackedTileFn = void (*)(int64_t n, const uint8_t* w, size_t group_bytes, int64_t rows,
                              const uint8_t* x, size_t x_stride, int64_t cols, float* out,
                              int64_t out_stride);
PackedTileFn packed_tile_fn(DType wtype, CpuIsa isa);
// The AMX int8 kernel of a quantized Rows16 type but Q2_K / Q3_K (packed_tile_fn picks it
// for Avx512 when amx_int8_available()), on the CPU's tiles or, with `emulated`, on the
// software model (amx_tiles.h; needs Avx512 only). nullptr when not runnable.
PackedTileFn packed_amx_fn(DType wtype, bool emulated);

// Drives a kernel K over a rows x cols tile. K provides
//   static constexpr int kRows, kCols;  // register tile for batches of columns
//   static constexpr int kGemvRows;     // rows per step for a single column
//   template <int RB, int CB> static void micro(int64_t n, const uint8_t* w, size_t ws,
//       const uint8_t* x, size_t xs, float* out, int64_t os);
// Columns go in groups of kCols, then one group of the 1..kCols-1 left (so a
// batch of 2 or 3 still reads each weight once). Column groups are the outer
// loop so a group stays in L1 while the rows of the tile pass by.
template <class K, int R, int C>
void sweep_rows(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const uint8_t* x, size_t xs,
                float* out, int64_t os) {
  int64_t r = 0;
  for (; r + R <= rows; r += R) K::template micro<R, C>(n, w + r * ws, ws, x, xs, out + r, os);
  for (; r < rows; ++r) K::template micro<1, C>(n, w + r * ws, ws, x, xs, out + r, os);
}

template <class K, int C>
void sweep_tail(int64_t left, int64_t n, const uint8_t* w, size_t ws, int64_t rows,
                const uint8_t* x, size_t xs, float* out, int64_t os) {
  if (left == C) {
    constexpr int R = C == 1 ? K::kGemvRows : K::kRows;
    return sweep_rows<K, R, C>(n, w, ws, rows, x, xs, out, os);
  }
  if constexpr (C > 1) sweep_tail<K, C - 1>(left, n, w, ws, rows, x, xs, out, os);
}

template <class K>
void run_tile(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const uint8_t* x, size_t xs,
              int64_t cols, float* out, int64_t os) {
  constexpr int CB = K::kCols;
  int64_t c = 0;
  for (; c + CB <= cols; c += CB)
    sweep_rows<K, K::kRows, CB>(n, w, ws, rows, x + c * xs, xs, out + c * os, os);
  if (c < cols) {
    if constexpr (CB > 1)
      sweep_tail<K, CB - 1>(cols - c, n, w, ws, rows, x + c * xs, xs, out + c * os, os);
  }
}

}  // namespace pagellm::cpu::detail
