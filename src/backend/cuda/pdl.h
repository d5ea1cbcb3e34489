// Programmatic dependent launch (Hopper, sm_90 and newer): a kernel launched
// with it may be scheduled while the kernel before it on the stream is still
// finishing, and waits inside (pdl.cuh: pdl_wait) until that kernel is done
// and its writes are visible. The gap between dependent kernels (a few
// microseconds each, hundreds of them per decode step) then overlaps the
// previous kernel's tail.
#pragma once

#include "backend/cuda/cuda_device.h"

namespace pagellm::cuda {

// True when this GPU takes dependent launches, in plain streams and in
// stream captures (CUDA graphs): probed once per device with a small kernel.
// False before sm_90, when the probe fails, or with PAGELLM_CUDA_PDL=0.
bool pdl_enabled(const CudaDevice& dev);

}  // namespace pagellm::cuda
