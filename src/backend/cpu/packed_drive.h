// Internal to backend/cpu: the column driver shared by the Rows16 kernels
// (matmul_packed.cpp: Q4_0 / Q8_0; matmul_packed_k.cpp: Q4_K / Q5_K / Q6_K). A
// kernel K provides
//   static constexpr int kCols;     // columns per register tile
//   template <int CB> static void group(int64_t n, const uint8_t* group_base,
//       const uint8_t* x, size_t x_stride, float* out, int64_t out_stride,
//       int valid_rows);            // one 16-row group times CB columns
//   static void tail(int left, ...) // 0 < left < kCols columns (tail_of)
#pragma once

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/packed_weights.h"

namespace pagellm::cpu::detail {

// Every Rows16 group is one forward run of bytes, which a thread reads in
// order. A tile of several columns works long enough on each block that the
// hardware prefetcher alone leaves it waiting on memory, so such tiles hint the
// L2 this far ahead (16 columns from DRAM: +10% Q4_0, +30% Q8_0). A one-column
// tile (decode) reads fast enough for the hardware prefetcher, and hints only
// take its load slots (Zen 4, one thread, GEMV from DRAM: Q4_K 20 GB/s with
// hints, 23.5 without).
constexpr size_t kPrefetchBytes = 8192;
constexpr int kPrefetchMinCols = 2;

// Columns in tiles of kCols, the tail with a tile of its exact width; column
// chunks of kColChunk outermost so their activations stay in L2 while the
// weight groups pass by.
template <class K>
void drive(int64_t n, const uint8_t* w, size_t gb, int64_t rows, const uint8_t* x, size_t xs,
           int64_t cols, float* out, int64_t os) {
  constexpr int64_t kColChunk = 64;
  const int64_t groups = (rows + kPackRows - 1) / kPackRows;
  for (int64_t c0 = 0; c0 < cols; c0 += kColChunk) {
    const int64_t cc = std::min(kColChunk, cols - c0);
    for (int64_t g = 0; g < groups; ++g) {
      const int valid = static_cast<int>(std::min<int64_t>(kPackRows, rows - g * kPackRows));
      const uint8_t* wg = w + static_cast<size_t>(g) * gb;
      float* og = out + c0 * os + g * kPackRows;
      const uint8_t* xc = x + static_cast<size_t>(c0) * xs;
      int64_t c = 0;
      for (; c + K::kCols <= cc; c += K::kCols)
        K::template group<K::kCols>(n, wg, xc + c * xs, xs, og + c * os, os, valid);
      K::tail(static_cast<int>(cc - c), n, wg, xc + c * xs, xs, og + c * os, os, valid);
    }
  }
}

// Dispatches a tail of 0 < left < kCols columns to group<left>.
template <class K, int CB>
void tail_of(int left, int64_t n, const uint8_t* wg, const uint8_t* x, size_t xs, float* out,
             int64_t os, int valid) {
  if constexpr (CB > 0) {
    if (left == CB) return K::template group<CB>(n, wg, x, xs, out, os, valid);
    tail_of<K, CB - 1>(left, n, wg, x, xs, out, os, valid);
  }
}

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Stores CB column tiles of 16 rows (out + c * os), the first `valid` rows.
template <int CB>
inline void store_rows16(float* out, int64_t os, const __m512 (&acc)[CB], int valid) {
  const __mmask16 mask = valid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
  for (int c = 0; c < CB; ++c) _mm512_mask_storeu_ps(out + c * os, mask, acc[c]);
}
PAGELLM_TARGET_END
#endif

#if PAGELLM_HAVE_AVX2
PAGELLM_TARGET_AVX2
// Stores CB column tiles of 8 rows (out + c * os), the first `valid` rows.
template <int CB>
inline void store_rows8(float* out, int64_t os, const __m256 (&acc)[CB], int valid) {
  for (int c = 0; c < CB; ++c) {
    if (valid >= 8) {
      _mm256_storeu_ps(out + c * os, acc[c]);
    } else {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, acc[c]);
      std::memcpy(out + c * os, tmp, sizeof(float) * static_cast<size_t>(valid));
    }
  }
}
PAGELLM_TARGET_END
#endif

// The K-quant kernels (matmul_packed_k.cpp); nullptr when the variant is not
// compiled in.
PackedTileFn packed_q4k_fn(CpuIsa isa);
PackedTileFn packed_q5k_fn(CpuIsa isa);
PackedTileFn packed_q6k_fn(CpuIsa isa);

}  // namespace pagellm::cpu::detail
