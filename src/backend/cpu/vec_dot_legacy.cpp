// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4 weights times Q8_0 / Q8_1 activations, AVX2 and
// AVX-512 VNNI. One 32-element block fills one 256-bit register. Per block and
// (weight row, activation row) pair:
//   lanes = exact int32 partial sums of q_w * q_x (lane i: elements 4i..4i+3)
//   acc   = fma(float(lanes), broadcast(d_w) * broadcast(d_x), acc)
//   acc   = fma(broadcast(m_w), {s_x, 0, ..., 0}, acc)       (Q4_1 / Q5_1 only)
// and the output is simd::hsum(acc). The integer lanes are exact, so the AVX2
// (maddubs) and VNNI (dpbusd) variants give bit-identical results.
//
// Unsigned weight codes (Q4_0: q in 0..15, x = d * (q - 8)) are multiplied as
// is and the offset removed with a per-activation-block correction
// -8 * (lane sums of q_x), which starts the lane accumulator.
#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/simd.h"
#include "tensor/blocks.h"

namespace pagellm::cpu::detail {

#define PAGELLM_DOT_KERNELS "backend/cpu/vec_dot_legacy_x86.inc"
#define PAGELLM_DOT_TABLE legacy_table
#define PAGELLM_DOT_ENTRY legacy_dot_tile
#include "backend/cpu/dot_isa_variants.inc"

}  // namespace pagellm::cpu::detail
