#include "backend/cuda/pdl.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "backend/cuda/pdl.cuh"

namespace pagellm::cuda {

using namespace detail;

namespace {

__global__ void probe_kernel(int* x) {
  pdl_start();
  if (threadIdx.x == 0 && blockIdx.x == 0) *x += 1;
}

// The kernels' waits are compiled in (sm_90 code or PTX: a build for older
// GPUs only, which a Hopper GPU runs from sm_80 PTX, has none and must not
// launch dependently); then two dependent launches on a stream of their own,
// and the same in a captured graph; then the counter must read 4.
bool probe(int index) {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(index);
  cudaFuncAttributes fa = {};
  if (cudaFuncGetAttributes(&fa, probe_kernel) != cudaSuccess || fa.ptxVersion < 90) {
    cudaGetLastError();
    cudaSetDevice(prev);
    return false;
  }
  cudaStream_t s = nullptr;
  int* d = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool ok = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
            cudaMalloc(&d, sizeof(int)) == cudaSuccess &&
            cudaMemsetAsync(d, 0, sizeof(int), s) == cudaSuccess;
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  for (int i = 0; ok && i < 2; ++i) ok = cudaLaunchKernelEx(&cfg, probe_kernel, d) == cudaSuccess;
  if (ok) ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    bool launched = true;
    for (int i = 0; launched && i < 2; ++i)
      launched = cudaLaunchKernelEx(&cfg, probe_kernel, d) == cudaSuccess;
    ok = cudaStreamEndCapture(s, &graph) == cudaSuccess && launched && graph;
  }
  if (ok) ok = cudaGraphInstantiateWithFlags(&exec, graph, 0) == cudaSuccess;
  if (ok) ok = cudaGraphLaunch(exec, s) == cudaSuccess;
  int h = 0;
  if (ok) ok = cudaMemcpyAsync(&h, d, sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess;
  if (ok) ok = cudaStreamSynchronize(s) == cudaSuccess && h == 4;
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (d) cudaFree(d);
  if (s) cudaStreamDestroy(s);
  cudaGetLastError();  // a failed probe is an answer, not the next call's error
  cudaSetDevice(prev);
  return ok;
}

}  // namespace

bool pdl_enabled(const CudaDevice& dev) {
  // Asked at every launch: one atomic load once known (0 unknown, 1 off, 2 on).
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];
  static std::mutex mu;
  const int i = dev.index();
  const bool cached = i >= 0 && i < kDevices;
  if (cached) {
    const int k = known[i].load(std::memory_order_acquire);
    if (k != 0) return k == 2;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cached && known[i].load(std::memory_order_relaxed) != 0)
    return known[i].load(std::memory_order_relaxed) == 2;
  const char* e = std::getenv("PAGELLM_CUDA_PDL");
  const bool on =
      !(e && std::string(e) == "0") && dev.compute_capability() >= 90 && probe(dev.index());
  if (cached) known[i].store(on ? 2 : 1, std::memory_order_release);
  return on;
}

}  // namespace pagellm::cuda
