// A STREAM-like read probe of a GPU's memory, for the decode roofline: a
// kernel that reads `bytes` of device memory in 16-byte loads (grid-stride,
// every SM busy), timed with CUDA events over a few passes after a warm-up.
#pragma once

#include <cstddef>

#include "backend/cuda/cuda_device.h"

namespace pagellm::cuda {

// Bytes per second read; throws CudaError (e.g. when `bytes` cannot be had).
double measure_read_bandwidth(const CudaDevice& dev, size_t bytes = size_t{1} << 30);

}  // namespace pagellm::cuda
