// Rounding one token's K (or V) row into a KV cache slot on the CPU.
//   row  [n_kv_heads * head_dim] f32
//   dst  one slot of a cache of `type` (kvcache/kv_pool.h): F32, F16, or Q8_0
//        (each head row head_dim / 32 blocks {f16 d; i8 qs[32]})
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace pagellm::cpu {

void store_kv_row(DType type, int32_t n_kv_heads, int32_t head_dim, const float* row, void* dst);

}  // namespace pagellm::cpu
