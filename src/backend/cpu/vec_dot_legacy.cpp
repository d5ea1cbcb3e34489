// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL weights times Q8_0 / Q8_1 activations, AVX2 and
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

#if PAGELLM_HAVE_AVX2
// Compiled twice: for AVX2 (maddubs / madd) and for AVX-512 VNNI (dpbusd /
// dpwssd on 256-bit registers).
PAGELLM_TARGET_AVX2
namespace avx2 {
constexpr int kTileCols = 2;  // 16 ymm registers
#include "backend/cpu/vec_dot_legacy_x86.inc"
}  // namespace avx2
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2
#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
namespace avx512 {
constexpr int kTileCols = 4;  // 32 registers with AVX-512
#include "backend/cpu/vec_dot_legacy_x86.inc"
}  // namespace avx512
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

DotTileFn legacy_dot_tile(DType wtype, CpuIsa isa) {
#if PAGELLM_HAVE_AVX512
  if (isa == CpuIsa::Avx512) return avx512::legacy_table<true>(wtype);
#endif
#if PAGELLM_HAVE_AVX2
  if (isa == CpuIsa::Avx2) return avx2::legacy_table<false>(wtype);
#endif
  (void)wtype;
  (void)isa;
  return nullptr;
}

}  // namespace pagellm::cpu::detail
