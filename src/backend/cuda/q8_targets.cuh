// The matrices of one int8 launch (gemv_q8_multi, mmq_multi) as a kernel
// argument: their GemvQ8Target fields, and the first CUDA block (of the grid
// dimension that walks them) of each (needs nvcc).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/gemv_q8.h"

namespace pagellm::cuda::detail {

struct Q8Targets {
  const uint8_t* w[kGemvQ8MaxTargets];
  int64_t rows[kGemvQ8MaxTargets];
  float* y[kGemvQ8MaxTargets];
  int64_t y_stride[kGemvQ8MaxTargets];
  float* add_to[kGemvQ8MaxTargets];
  unsigned first[kGemvQ8MaxTargets + 1];
  int n;

  // The matrix CUDA block b works on.
  __host__ __device__ __forceinline__ int of(unsigned b) const {
    int m = 0;
    while (m + 1 < n && b >= first[m + 1]) ++m;
    return m;
  }
};

// targets[0 .. n) from vector v0 on (y and add_to moved on by v0 vectors),
// blocks_of(rows) CUDA blocks each; first[n] is the total.
template <typename F>
Q8Targets make_q8_targets(const GemvQ8Target* targets, int n, int64_t v0, F&& blocks_of) {
  Q8Targets tg{};
  tg.n = n;
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    const GemvQ8Target& t = targets[i];
    tg.w[i] = static_cast<const uint8_t*>(t.w);
    tg.rows[i] = t.rows;
    tg.y[i] = t.y + v0 * t.y_stride;
    tg.y_stride[i] = t.y_stride;
    tg.add_to[i] = t.add_to ? t.add_to + v0 * t.y_stride : nullptr;
    tg.first[i] = static_cast<unsigned>(blocks);
    blocks += blocks_of(t.rows);
  }
  tg.first[n] = static_cast<unsigned>(blocks);
  return tg;
}

}  // namespace pagellm::cuda::detail
