// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS weights times Q8_K activations, AVX2 and
// AVX-512 VNNI. A 256-element super-block is handled as 8 chunks of 32
// elements (one 256-bit register of weight codes u, unsigned). Per super-block
// and (weight row, activation row) pair:
//   L    = int32 lanes: start value (below), then for each chunk k in order
//          L += pair sums of maddubs(u_k, q_x) times the sub-block scales
//   Q2_K, Q4_K, Q5_K (x = d * sc * u - dmin * m):
//          acc = fma(float(madd(bsums, mins)), broadcast(-(dmin * d_x)), acc)
//          before the chunks, L starting at 0
//   Q3_K, Q6_K (x = d * sc * (u - offset), offset 4 / 32):
//          L starts at -offset * madd(bsums, scales)
//   IQ4_XS (x = d * sc * v, v a signed table value): L starts at 0 and the
//          chunks add maddubs(|v|, q_x with v's sign)
//   acc  = fma(float(L), broadcast(d * d_x), acc)
// and the output is simd::hsum(acc). Integer steps are exact, so AVX2 (madd)
// and VNNI (dpwssd) variants agree bit for bit.
#include <cstring>
#include <utility>

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
#include "backend/cpu/vec_dot_kquant_x86.inc"
}  // namespace avx2
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX2
#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
namespace avx512 {
constexpr int kTileCols = 4;  // 32 registers with AVX-512
#include "backend/cpu/vec_dot_kquant_x86.inc"
}  // namespace avx512
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

DotTileFn kquant_dot_tile(DType wtype, CpuIsa isa) {
#if PAGELLM_HAVE_AVX512
  if (isa == CpuIsa::Avx512) return avx512::kquant_table<true>(wtype);
#endif
#if PAGELLM_HAVE_AVX2
  if (isa == CpuIsa::Avx2) return avx2::kquant_table<false>(wtype);
#endif
  (void)wtype;
  (void)isa;
  return nullptr;
}

}  // namespace pagellm::cpu::detail
