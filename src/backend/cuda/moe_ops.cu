#include "backend/cuda/moe_ops.h"

#include <cmath>

#include "backend/cuda/device_common.cuh"
#include "backend/cuda/pdl.cuh"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr int kThreads = 256;

// Element i of token t's sum: fused multiply-adds in slot order.
__host__ __device__ inline float combine_value(const float* y, int64_t n, const int32_t* rows,
                                               const float* weights, int32_t k, int64_t i,
                                               float prior, bool add) {
  float s = 0.0f;
  for (int32_t j = 0; j < k; ++j) s = fmaf(weights[j], y[static_cast<int64_t>(rows[j]) * n + i], s);
  return add ? prior + s : s;
}

__global__ void gather_kernel(const float* x, int64_t n, const int32_t* rows, int64_t count,
                              float* out) {
  pdl_start();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= count * n) return;
  const int64_t r = e / n, i = e % n;
  out[e] = x[static_cast<int64_t>(rows[r]) * n + i];
}

__global__ void combine_kernel(const float* y, int64_t n, const int32_t* rows,
                               const float* weights, int64_t n_tokens, int32_t k, float* out,
                               bool add) {
  pdl_start();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n_tokens * n) return;
  const int64_t t = e / n, i = e % n;
  out[e] = combine_value(y, n, rows + t * k, weights + t * k, k, i, add ? out[e] : 0.0f, add);
}

}  // namespace

void gather_rows(const CudaDevice& dev, const float* x, int64_t n, const int32_t* rows,
                 int64_t count, float* out) {
  if (count * n == 0) return;
  dev.make_current();
  launch_pdl(dev, "gather_rows", gather_kernel, dim3(grid_for(count * n, kThreads)),
             dim3(kThreads), 0, x, n, rows, count, out);
}

void combine_rows(const CudaDevice& dev, const float* y, int64_t n, const int32_t* rows,
                  const float* weights, int64_t n_tokens, int32_t k, float* out, bool add) {
  if (n_tokens * n == 0) return;
  dev.make_current();
  launch_pdl(dev, "combine_rows", combine_kernel, dim3(grid_for(n_tokens * n, kThreads)),
             dim3(kThreads), 0, y, n, rows, weights, n_tokens, k, out, add);
}

void combine_rows_host(const float* y, int64_t n, const int32_t* rows, const float* weights,
                       int64_t n_tokens, int32_t k, float* out, bool add) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < n; ++i)
      out[t * n + i] = combine_value(y, n, rows + t * k, weights + t * k, k, i, out[t * n + i], add);
}

}  // namespace pagellm::cuda
