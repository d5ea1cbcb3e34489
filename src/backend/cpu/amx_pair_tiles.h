// The AMX kernels' pair tiles (packed_drive.h's drive_amx and the per-format
// AMX policies): their configuration, the two products at once and the
// signed-scale sums.
#pragma once

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/amx_tiles.h"

#if PAGELLM_HAVE_AMX
PAGELLM_TARGET_AMX
namespace pagellm::cpu::detail {

// The AMX kernels' tiles: two products at once, each of `cols` activation rows
// times `k_bytes` codes: 0, 1 = A (cols x k_bytes, s8); 2, 3 = B (k_bytes / 4
// rows x 64 bytes: 16 weight rows, u8); 4, 5 = C (cols x 16 int32).
inline TileConfig pair_tiles(int cols, int k_bytes) {
  TileConfig cfg;
  for (int t : {0, 1}) {
    cfg.rows[t] = static_cast<uint8_t>(cols);
    cfg.colsb[t] = static_cast<uint16_t>(k_bytes);
  }
  for (int t : {2, 3}) {
    cfg.rows[t] = static_cast<uint8_t>(k_bytes / 4);
    cfg.colsb[t] = 64;
  }
  for (int t : {4, 5}) {
    cfg.rows[t] = static_cast<uint8_t>(cols);
    cfg.colsb[t] = 64;
  }
  return cfg;
}

// C += A B on the pair tiles (C, A, B) = (4, 0, 2) or (5, 1, 3): B's bytes
// unsigned (TDPBSUD) or, with kSignedB, signed (TDPBSSD).
template <class Tiles, bool kSignedB, int C, int A, int B>
inline __attribute__((always_inline)) void tile_dot() {
  if constexpr (kSignedB)
    Tiles::template dpbssd<C, A, B>();
  else
    Tiles::template dpbsud<C, A, B>();
}

// The pair tiles' two products, C0 = A0 B0 and C1 = A1 B1 (A rows a_stride
// bytes apart, B rows 64), stored to sums[0] and sums[1].
template <class Tiles, bool kSignedB = false>
inline __attribute__((always_inline)) void pair_products(const uint8_t* a0, const uint8_t* a1,
                                                         size_t a_stride, const uint8_t* b0,
                                                         const uint8_t* b1,
                                                         int32_t (&sums)[2][16][16]) {
  Tiles::template load<0>(a0, a_stride);
  Tiles::template load<1>(a1, a_stride);
  Tiles::template load<2>(b0, 64);
  Tiles::template load<3>(b1, 64);
  Tiles::template zero<4>();
  Tiles::template zero<5>();
  tile_dot<Tiles, kSignedB, 4, 0, 2>();
  tile_dot<Tiles, kSignedB, 5, 1, 3>();
  Tiles::template store<4>(sums[0], 64);
  Tiles::template store<5>(sums[1], 64);
}

// The first product alone (an odd last block): sums[0] = A0 B0.
template <class Tiles, bool kSignedB = false>
inline __attribute__((always_inline)) void first_product(const uint8_t* a0, size_t a_stride,
                                                         const uint8_t* b0,
                                                         int32_t (&sums)[2][16][16]) {
  Tiles::template load<0>(a0, a_stride);
  Tiles::template load<2>(b0, 64);
  Tiles::template zero<4>();
  tile_dot<Tiles, kSignedB, 4, 0, 2>();
  Tiles::template store<4>(sums[0], 64);
}

// S[c] += scale_h * sums[h][c] for a pair's two sub-blocks (h = 0, 1), the 16
// rows' signed 8-bit scales of sub-block h at scales + 16 * h.
template <int CB>
inline __attribute__((always_inline)) void add_pair_scaled_s8(const uint8_t* scales,
                                                              const int32_t (&sums)[2][16][16],
                                                              __m512i (&S)[CB]) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512i sc = _mm512_cvtepi8_epi32(simd::load128(scales + 16 * h));
#pragma GCC unroll 16
    for (int c = 0; c < CB; ++c)
      S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(_mm512_load_si512(sums[h][c]), sc));
  }
}

}  // namespace pagellm::cpu::detail
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AMX
