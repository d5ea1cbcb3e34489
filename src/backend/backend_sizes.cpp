#include "backend/backend_sizes.h"

#include "backend/cpu/packed_weights.h"

namespace pagellm {

bool cpu_repacks(DType type) {
  return cpu::packable(type);
}

size_t cpu_repacked_bytes(DType type, int64_t n_in, int64_t n_out) {
  return cpu::packed_bytes(type, n_in, n_out);
}

}  // namespace pagellm
