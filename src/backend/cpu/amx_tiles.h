// AMX tiles (Intel Advanced Matrix Extensions) as the Rows16 int8 kernels use
// them, and a software model of the same instructions, so those kernels are
// tested on CPUs without AMX. Internal to backend/cpu.
//
// Tile configuration (LDTILECFG, palette 1), 64 bytes:
//   byte  0       palette id: 1
//   byte  1       start row: 0
//   bytes 2-15    zero
//   bytes 16-47   colsb[16]: bytes per row of tile i (uint16, at most 64; tiles 0-7)
//   bytes 48-63   rows[16]: rows of tile i (at most 16)
// A configured tile holds rows x colsb bytes; using an unconfigured one, or a
// configuration outside those limits, raises #UD.
//
// Instructions used (t, a, b, c: tile numbers fixed at compile time):
//   TILEZERO   t                 every byte 0
//   TILELOADD  t, [base + stride] row r = the colsb bytes at base + r * stride
//   TILESTORED [base + stride], t
//   TDPBSUD    c, a, b           for m < rows(c), n < colsb(c) / 4,
//                                k < colsb(a) / 4:
//                 c.int32[m][n] += sum over i < 4 of s8(a[m][4k + i]) * u8(b[k][4n + i])
//              The shapes must agree (rows(a) = rows(c), colsb(a) = 4 rows(b),
//              colsb(b) = colsb(c)), or the CPU raises #UD. The sums are exact
//              int32, as VNNI's vpdpbusd: a kernel on either gives the same bits.
//   TDPBSSD    c, a, b           the same with b's bytes signed too: s8(b[k][4n + i])
//   TILERELEASE                  back to the unconfigured state
// Linux hands a process the tile data state only after
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), which
// amx_int8_available() asks for once.
#pragma once

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_isa.h"  // amx_int8_available

namespace pagellm::cpu::detail {

struct TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// The software model: the instructions above on 8 tiles of 1 KiB per thread,
// checking every shape the CPU would check (Error where it raises #UD).
struct EmuTiles {
  static void configure(const TileConfig& cfg);
  static void release();
  template <int T>
  static void zero() {
    zero_tile(T);
  }
  template <int T>
  static void load(const void* base, size_t stride) {
    load_tile(T, base, stride);
  }
  template <int T>
  static void store(void* base, size_t stride) {
    store_tile(T, base, stride);
  }
  template <int C, int A, int B>
  static void dpbsud() {
    dot_tiles(C, A, B, false);
  }
  template <int C, int A, int B>
  static void dpbssd() {
    dot_tiles(C, A, B, true);
  }

 private:
  static void zero_tile(int t);
  static void load_tile(int t, const void* base, size_t stride);
  static void store_tile(int t, void* base, size_t stride);
  static void dot_tiles(int c, int a, int b, bool b_signed);
};

#if PAGELLM_HAVE_AMX
PAGELLM_TARGET_AMX
// The CPU's tiles. The intrinsics paste the tile number into the instruction
// text, so each number has its own branch.
struct HwTiles {
  static void configure(const TileConfig& cfg) { _tile_loadconfig(&cfg); }
  static void release() { _tile_release(); }
#define PAGELLM_TILE_CASES(op) \
  if constexpr (T == 0)        \
    op(0);                     \
  else if constexpr (T == 1)   \
    op(1);                     \
  else if constexpr (T == 2)   \
    op(2);                     \
  else if constexpr (T == 3)   \
    op(3);                     \
  else if constexpr (T == 4)   \
    op(4);                     \
  else if constexpr (T == 5)   \
    op(5);                     \
  else if constexpr (T == 6)   \
    op(6);                     \
  else if constexpr (T == 7)   \
    op(7);                     \
  else                         \
    static_assert(T < 0, "tiles are numbered 0-7")
  template <int T>
  static void zero() {
#define PAGELLM_OP(t) _tile_zero(t)
    PAGELLM_TILE_CASES(PAGELLM_OP);
#undef PAGELLM_OP
  }
  template <int T>
  static void load(const void* base, size_t stride) {
#define PAGELLM_OP(t) _tile_loadd(t, base, stride)
    PAGELLM_TILE_CASES(PAGELLM_OP);
#undef PAGELLM_OP
  }
  template <int T>
  static void store(void* base, size_t stride) {
#define PAGELLM_OP(t) _tile_stored(t, base, stride)
    PAGELLM_TILE_CASES(PAGELLM_OP);
#undef PAGELLM_OP
  }
#undef PAGELLM_TILE_CASES
  // The (c, a, b) triples the kernels use.
  template <int C, int A, int B>
  static void dpbsud() {
    if constexpr (C == 4 && A == 0 && B == 2)
      _tile_dpbsud(4, 0, 2);
    else if constexpr (C == 5 && A == 1 && B == 3)
      _tile_dpbsud(5, 1, 3);
    else
      static_assert(C == 4 && A == 0 && B == 2, "add the triple here");
  }
  template <int C, int A, int B>
  static void dpbssd() {
    if constexpr (C == 4 && A == 0 && B == 2)
      _tile_dpbssd(4, 0, 2);
    else if constexpr (C == 5 && A == 1 && B == 3)
      _tile_dpbssd(5, 1, 3);
    else
      static_assert(C == 4 && A == 0 && B == 2, "add the triple here");
  }
};
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AMX

}  // namespace pagellm::cpu::detail
