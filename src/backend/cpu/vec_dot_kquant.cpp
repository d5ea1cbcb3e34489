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

#define PAGELLM_DOT_KERNELS "backend/cpu/vec_dot_kquant_x86.inc"
#define PAGELLM_DOT_TABLE kquant_table
#define PAGELLM_DOT_ENTRY kquant_dot_tile
#include "backend/cpu/dot_isa_variants.inc"

}  // namespace pagellm::cpu::detail
