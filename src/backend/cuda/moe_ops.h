// Mixture-of-experts kernels of the CUDA backend (Backend::gather_rows and
// combine_rows): the step's rows gathered by expert, and each token's
// experts' outputs summed with their routing weights. Index and weight arrays
// are device memory here (the backend uploads them). Queued on dev.stream().
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_device.h"

namespace pagellm::cuda {

// out[i] = x[rows[i]] for i < count, rows of n floats.
void gather_rows(const CudaDevice& dev, const float* x, int64_t n, const int32_t* rows,
                 int64_t count, float* out);

// For each token t: s = sum over j < k of weights[t*k + j] * y[rows[t*k + j]]
// (fused multiply-adds in j order, from 0), out[t] = add ? out[t] + s : s.
void combine_rows(const CudaDevice& dev, const float* y, int64_t n, const int32_t* rows,
                  const float* weights, int64_t n_tokens, int32_t k, float* out, bool add);

// combine_rows on the host by the kernel's own per-element code (host
// memory): tests check it against the CPU backend without a GPU.
void combine_rows_host(const float* y, int64_t n, const int32_t* rows, const float* weights,
                       int64_t n_tokens, int32_t k, float* out, bool add);

}  // namespace pagellm::cuda
