// The Rows16 weight layout: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K .. Q6_K,
// IQ4_XS, F16 and BF16 matrices repacked once at load. For the quantized types one 512-bit register
// holds the same four codes of 16 consecutive rows. An integer dot product instruction (VNNI
// vpdpbusd) then yields the exact block sums of 16 rows at once, one row per 32-bit lane, and the
// float scale and accumulation run lane-wise: no horizontal sums, no per-row shuffles.
//
// Rows are taken 16 at a time ("groups"; the last group is padded with rows
// of zeros). For the 32-element block types, with nb = n_in / 32 blocks per
// row, a group holds the blocks in pairs, each pair one forward run of bytes
// (one stream for the hardware prefetcher; codes and scales in two separate
// runs read at 2/3 of the speed on Zen 4):
//
//   pair p  at p * (2C + 2S): block 2p's codes (C bytes), block 2p+1's codes
//           (C bytes), then block 2p's scales (S bytes) and block 2p+1's
//           (S bytes). With nb odd, the last pair holds one block: its codes,
//           its scales and S bytes of padding, (C + 2S) bytes.
//   codes   C / 64 chunks of 64 bytes; chunk byte 4 * lane + j belongs to row
//           (16g + lane)
//   scales  the block's 16 f16 scales (d of each row), lane order (S = 32);
//           Q4_1 and Q5_1 (S = 64): then the 16 f16 mins (m of each row)
//
// so group_bytes = nb * (C + S), plus S when nb is odd; every block's
// codes start on a 64-byte boundary (but MXFP4's, S = 16: a pair is 544 bytes,
// exactly the file's 16 rows x 2 blocks x 17 bytes).
//
//   Q4_0 (C = 256): chunk k (0..3) byte 4*lane+j = the row's qs[4k + j], i.e.
//        element 4k+j in the low nibble and element 16+4k+j in the high one;
//        codes are unsigned 0..15, value = d * (code - 8).
//   Q8_0 (C = 512): chunk k (0..7) byte 4*lane+j = the row's qs[4k + j] + 128
//        (as u8), value = d * (code - 128).
//   Q5_0 (C = 320): first the fifth bits, 64 bytes: byte 4*lane+j has bit k =
//        the fifth bit of element 4k + j (the row's qh bit 4k + j), so that
//        dword group k reads bit k of every byte; then Q4_0's 256 nibble bytes
//        (the row's qs). Code = nibble + 16 * bit (0..31), value = d * (code -
//        16). The file's 22 bytes per row and block, rearranged.
//   Q4_1 (C = 256), Q5_1 (C = 320): the codes of Q4_0 and Q5_0, value = d *
//        code + m.
//   IQ4_NL (C = 256): Q4_0's nibble layout (the row's qs), value = d *
//        kIq4NlValues[code].
//   MXFP4 (C = 256, S = 16): Q4_0's nibble layout; scales = the 16 rows'
//        exponent bytes e, lane order; value = 2^(e-128) * kMxfp4Values[code].
//
//   Q4_K: per 256-element super-block s, kQ4KSuper = 2368 bytes at s * 2368
//        (group_bytes = n_in / 256 * 2368, 2.8% more than the file's rows):
//          codes   4 chunks c of 8 x 64 bytes: byte 512c + 64k + 4*lane + i = the
//                  row's qs[32c + 4k + i] (elements 64c + 4k + i in the low
//                  nibble, 64c + 32 + 4k + i in the high one)
//          scales  at 2048: byte 16j + lane = sub-block j's 6-bit scale
//          mins    at 2176: byte 2 * (16 * (j / 2) + lane) + j % 2 = its 6-bit
//                  min (widened to the int16 pairs of vpdpwssd when read)
//          d, dmin at 2304 and 2336: 16 f16 each, lane order
//        value = d * scale_j * code - dmin * min_j.
//   Q5_K: per super-block 2880 bytes (2.3% more than the file's rows): first
//        the fifth bits, 8 x 64 bytes: byte 64k + 4*lane + i = the row's
//        qh[4k + i], whose bit j is the fifth bit of element 32j + 4k + i;
//        then at 512 Q4_K's 2368 bytes (offsets above + 512). Code = nibble +
//        16 * bit, value as Q4_K. (Bits first: one forward stream per group.)
//   Q6_K: per super-block s, 3360 bytes at s * 3360 (group_bytes = n_in / 256
//        * 3360); element e is in dword group G = e / 4, byte i = e % 4:
//          low 4 bits  at 64 * (G % 32) + 4*lane + i, nibble G / 32
//          high 2 bits at 2048 + 64 * (G % 16) + 4*lane + i, bits 2 * (G / 16)
//          scales      at 3072: int8 16j + lane = sub-block j's (16 elements)
//          d           at 3328: 16 f16, lane order
//        value = d * scale_j * (code - 32).
//   Q2_K: per super-block s, 1344 bytes at s * 1344 (the file's size):
//          codes  at 64 * (G % 16) + 4*lane + i, bits 2 * (G / 16) (G = e / 4,
//                 i = e % 4, as Q3_K's low bits)
//          scales at 1024: byte 16j + lane = sub-block j's byte of the file
//                 (scale in the low nibble, min in the high one)
//          d, dmin at 1280 and 1312: 16 f16 each, lane order
//        value = d * scale_j * code - dmin * min_j.
//   Q3_K: per super-block s, 1824 bytes at s * 1824 (3.6% more than the
//        file's rows); element e in dword group G = e / 4, byte i = e % 4:
//          low 2 bits at 64 * (G % 16) + 4*lane + i, bits 2 * (G / 16)
//          high bit   at 1024 + 64 * (G % 8) + 4*lane + i, bit G / 8
//          scales     at 1536: int8 16j + lane = sub-block j's (16 elements),
//                     unpacked from the 6-bit field (-32..31)
//          d          at 1792: 16 f16, lane order
//        value = d * scale_j * (code - 4), code = low | 4 * high.
//   IQ4_XS: per super-block s, 2208 bytes at s * 2208 (1.5% more than the
//        file's rows):
//          codes  sub-block j (32 elements) at 256 * j, Q4_0's nibble layout:
//                 chunk k (0..3) byte 4*lane+i = the row's qs[16j + 4k + i]
//                 (element 32j + 4k + i low, 32j + 16 + 4k + i high)
//          scales at 2048: int8 16j + lane = sub-block j's ls - 32
//          d      at 2176: 16 f16, lane order
//        value = d * scale_j * kIq4NlValues[code].
//   F16 / BF16: no register transpose, only rows interleaved by 32-element
//        chunks in quads, so that 4 rows are one forward stream instead of
//        4 (one core reads it 5-15% faster) and a group is 4 such streams one
//        after the other: quad q (rows 4q..4q+3) at q * nb * 256 (nb = n_in /
//        32), its chunk b (elements 32b..32b+31) at + b * 256, row 4q + j's 64
//        bytes at + 64 * j, unchanged; group_bytes = nb * 1024 (padding rows
//        are +0.0).
//
// For the 32-element block types, every block therefore is 8 "dword groups"
// of 4 elements: group k (elements 4k..4k+3) is chunk k for Q8_0, and the low
// (k < 4) or high (k >= 4) nibbles of chunk k % 4 for the others (plus bit k
// of Q5_0's and Q5_1's fifth-bit bytes). A group is exactly
// the bytes the row-major layout stores, so packing is lossless (unpack_row16
// inverts it; likewise for the K-quants, whose scales are unpacked, not
// rounded).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace pagellm::cpu {

constexpr int kPackRows = 16;
// F16 / BF16: rows per quad, and where row `lane` of a group has its chunk b
// (nb chunks per row).
constexpr int kFloatQuadRows = 4;
constexpr size_t float_rows16_at(int lane, int64_t b, int64_t nb) {
  return (static_cast<size_t>(lane / kFloatQuadRows) * static_cast<size_t>(nb) +
          static_cast<size_t>(b)) *
             (64 * kFloatQuadRows) +
         64 * static_cast<size_t>(lane % kFloatQuadRows);
}

// Types with a Rows16 layout.
bool packable(DType t);

// The 32-element block types (C code bytes and S scale bytes per block):
// where block b's codes and scales start in a group of nb blocks (the pairs
// above).
constexpr size_t rows16_codes_at(int64_t b, size_t C, size_t S) {
  return static_cast<size_t>(b / 2) * (2 * C + 2 * S) + static_cast<size_t>(b % 2) * C;
}
constexpr size_t rows16_scales_at(int64_t b, int64_t nb, size_t C, size_t S) {
  const int64_t first = b - b % 2;
  return static_cast<size_t>(b / 2) * (2 * C + 2 * S) + (first + 1 < nb ? 2 * C : C) +
         static_cast<size_t>(b % 2) * S;
}

// Bytes per 16-row group (n_in a multiple of 32) and of the whole matrix.
size_t packed_group_bytes(DType t, int64_t n_in);
size_t packed_bytes(DType t, int64_t n_in, int64_t n_out);

// Writes the Rows16 form of n_out rows (row r at src + r * src_stride, in
// tensor/blocks.h layout) to dst (packed_bytes bytes). Throws Error for a type
// that is not packable or n_in not a multiple of 32.
void pack_rows16(DType t, int64_t n_in, int64_t n_out, const void* src, size_t src_stride,
                 void* dst);

// Row r of a packed matrix back in tensor/blocks.h layout (dtype_row_bytes
// bytes at dst).
void unpack_row16(DType t, int64_t n_in, const void* packed, int64_t r, void* dst);

}  // namespace pagellm::cpu
