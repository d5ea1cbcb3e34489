// Internal to backend/cpu: what the Rows16 super-block formats with a signed
// 8-bit scale per sub-block (16 rows' at kScales + 16 j) and one f16 d per
// row (IQ4_XS: matmul_packed_iq4xs.cpp; Q6_K: matmul_packed_k.cpp) share:
// their scalar reference's frame and their AMX policy. Per row, column and
// super-block s: S = sum_j scale_j * I_j (I_j sub-block j's exact integer
// dot), acc = fma(float(S), d * d_x, acc).
#pragma once

#include "backend/cpu/packed_drive.h"  // first: wraps <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace pagellm::cpu::detail {

// The scalar kernel: scalar_k_frame with dot(sb, xr, s, lane, j) = I_j.
template <size_t kSuper, int kSubBlocks, size_t kScales, size_t kD, class Dot>
void scalar_s8_scaled_frame(int64_t n, const uint8_t* w, size_t gb, int64_t rows,
                            const uint8_t* x, size_t xs, int64_t cols, float* out, int64_t os,
                            Dot dot) {
  scalar_k_frame<kSuper>(
      n, w, gb, rows, x, xs, cols, out, os,
      [&](const uint8_t* sb, const XRowK& xr, int64_t s, int lane, float acc) {
        int32_t S = 0;
        for (int j = 0; j < kSubBlocks; ++j)
          S += static_cast<int8_t>(sb[kScales + 16 * j + lane]) * dot(sb, xr, s, lane, j);
        return std::fma(static_cast<float>(S), lane_f16(sb + kD, lane) * xr.d[s], acc);
      });
}

#if PAGELLM_HAVE_AMX
PAGELLM_TARGET_AMX
// The AMX policy (AmxSuper's P) over the format's VNNI policy V (its kCols,
// kSuper and finish on the same integers): sub-blocks j and j + 1 (of
// kSubBlocks, kKBytes codes each) at once on the pair tiles, A = the columns'
// activation codes, B = the 16 rows' signed codes (TDPBSSD), which
// Codes::pair(sb, j, b) writes to b[0], b[1]; C = I_j, I_j + 1, then
// S[c] += scale_j * I_j (add_pair_scaled_s8).
template <class V, class TilesT, class Codes, int kSubBlocks, int kKBytesT, size_t kScales>
struct AmxS8Pairs : V {
  using Tiles = TilesT;
  using Vnni = Super512<V>;
  static constexpr int kKBytes = kKBytesT;

  template <int CB>
  static __attribute__((always_inline)) void sums(const uint8_t* sb, const XRowK (&)[CB],
                                                  int64_t s, const uint8_t* x, size_t xs, bool,
                                                  __m512i (&S)[CB]) {
    alignas(64) uint8_t b[2][16 * kKBytes];
    alignas(64) int32_t dots[2][16][16];
    for (size_t l = 0; l < V::kSuper; l += 64) simd::prefetch(sb + kPrefetchBytes + l);
    for (int j = 0; j < kSubBlocks; j += 2) {
      Codes::pair(sb, j, b);
      const uint8_t* q = x + 256 * s + kKBytes * j;
      pair_products<Tiles, true>(q, q + kKBytes, xs, b[0], b[1], dots);
      add_pair_scaled_s8<CB>(sb + kScales + 16 * j, dots, S);
    }
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AMX

}  // namespace pagellm::cpu::detail
