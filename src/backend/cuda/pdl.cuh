// The device side of programmatic dependent launch (pdl.h) and the launch
// helper (needs nvcc). Every kernel launched by launch_pdl must call
// pdl_start() before it touches memory that earlier kernels on the stream
// read or write: it returns once they are complete. (On GPUs before sm_90,
// and for kernels launched plainly, both are no-ops.)
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.h"

namespace pagellm::cuda::detail {

__device__ __forceinline__ void pdl_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The next kernel may be scheduled now (it waits in its own pdl_start);
  // this one waits for the previous kernel.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, dev's stream>>>(args...), as a dependent launch
// where pdl_enabled(dev); throws CudaError naming `name` when it cannot launch.
template <typename... Params, typename... Args>
void launch_pdl(const CudaDevice& dev, const char* name, void (*kernel)(Params...), dim3 grid,
                dim3 block, size_t smem, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = static_cast<cudaStream_t>(dev.stream());
  cudaLaunchAttribute attr = {};
  if (pdl_enabled(dev)) {
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  if (e != cudaSuccess)
    throw CudaError(
        cuda_error_message(std::string("launch of ") + name, dev.index(), cuda_error_string(e)), e);
  check_launch(name, dev.index());  // an error a kernel left behind shows here
}

}  // namespace pagellm::cuda::detail
