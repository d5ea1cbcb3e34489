// The device side of programmatic dependent launch (pdl.h) and the launch
// helper (needs nvcc). Every kernel launched by launch_pdl must call
// pdl_start() (or pdl_trigger(), then pdl_wait()) before it touches memory
// that earlier kernels on the stream read or write: pdl_wait returns once
// they are complete. (On GPUs before sm_90,
// and for kernels launched plainly, both are no-ops.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.h"

namespace pagellm::cuda::detail {

// The next kernel may be scheduled now (it waits in its own pdl_start).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Returns once the previous kernel on the stream is complete, its writes visible.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_start() {
  pdl_trigger();
  pdl_wait();
}

// Asks L2 for bytes [p, p + n) of memory no kernel writes (weights), by the
// block's threads, 128-byte lines: a GEMV issues it before pdl_wait, so its
// first weight loads overlap the previous kernel's tail.
__device__ __forceinline__ void prefetch_l2(const uint8_t* p, size_t n) {
#if defined(__CUDA_ARCH__)
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{127};
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  for (uintptr_t a = first + 128 * static_cast<uintptr_t>(threadIdx.x); a < end;
       a += 128 * static_cast<uintptr_t>(blockDim.x))
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
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
