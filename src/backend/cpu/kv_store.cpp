#include "backend/cpu/kv_store.h"

#include <cstring>

#include "tensor/convert.h"

namespace pagellm::cpu {

void store_kv_row(DType type, int32_t n_kv_heads, int32_t head_dim, const float* row, void* dst) {
  const int64_t n = static_cast<int64_t>(n_kv_heads) * head_dim;
  auto* d = static_cast<uint8_t*>(dst);
  if (type == DType::F32) {
    std::memcpy(d, row, static_cast<size_t>(n) * 4);
  } else if (type == DType::Q8_0) {
    const size_t row_bytes = dtype_row_bytes(DType::Q8_0, head_dim);
    for (int32_t h = 0; h < n_kv_heads; ++h)
      quantize_row(DType::Q8_0, row + static_cast<int64_t>(h) * head_dim, d + h * row_bytes,
                   head_dim);
  } else {
    quantize_row(DType::F16, row, d, n);  // F16C where the CPU has it
  }
}

}  // namespace pagellm::cpu
