// Memory facts of the concrete backends that the layers above plan with
// (planner/model_footprint), so that they need not include backend/cpu or
// backend/cuda headers: the CPU kernels' repacked matrix sizes and the CUDA
// backend's fixed attention scratch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace pagellm {

// Whether the CPU backend repacks matrices of this type (Rows16), and the
// bytes of such an n_out x n_in matrix once repacked.
bool cpu_repacks(DType type);
size_t cpu_repacked_bytes(DType type, int64_t n_in, int64_t n_out);

// Device scratch of the CUDA split-attention partials (per device that runs
// layers; backend/cuda/paged_attention.h splits only while they fit).
constexpr size_t kCudaAttentionMaxWorkspace = size_t{16} << 20;

}  // namespace pagellm
