#include "backend/cuda/layer_graphs.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/cuda/cuda_check.h"

namespace pagellm::cuda {

namespace {

cudaStream_t stream_of(const CudaDevice& dev) {
  return static_cast<cudaStream_t>(dev.stream());
}

}  // namespace

LayerGraphs::LayerGraphs(const CudaDevice& dev, bool enabled) : dev_(dev), enabled_(enabled) {
  if (!enabled) off_reason_ = "turned off";
}

LayerGraphs::~LayerGraphs() {
  cancel();
  invalidate();
}

Backend::LayerRun LayerGraphs::begin(const Key& k) {
  if (!enabled_) return Backend::LayerRun::kRun;
  if (recording_) cancel();  // a recording the caller never ended
  dev_.make_current();
  if (auto it = execs_.find(k); it != execs_.end()) {
    check_cuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(it->second), stream_of(dev_)),
               "cudaGraphLaunch", dev_.index());
    ++replayed_;
    return Backend::LayerRun::kReplayed;
  }
  if (seen_.size() > 4 * kMaxGraphs) seen_.clear();
  if (seen_.insert(k).second) return Backend::LayerRun::kRun;  // first meeting
  const cudaError_t e = cudaStreamBeginCapture(stream_of(dev_), cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    fail("cudaStreamBeginCapture", e);
    return Backend::LayerRun::kRun;
  }
  recording_ = true;
  recording_key_ = k;
  return Backend::LayerRun::kRecord;
}

bool LayerGraphs::end() {
  if (!recording_) return false;
  dev_.make_current();
  recording_ = false;
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(stream_of(dev_), &graph);
  if (e != cudaSuccess || !graph) {
    if (graph) cudaGraphDestroy(graph);
    fail("cudaStreamEndCapture", e);
    return false;
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    fail("cudaGraphInstantiate", e);
    return false;
  }
  if (execs_.size() >= kMaxGraphs) invalidate();
  execs_[recording_key_] = exec;
  ++recorded_;
  check_cuda(cudaGraphLaunch(exec, stream_of(dev_)), "cudaGraphLaunch", dev_.index());
  return true;
}

void LayerGraphs::cancel() noexcept {
  if (!recording_) return;
  recording_ = false;
  // Met again, the shape runs unrecorded first: the run cut short may not
  // have grown every buffer it needs.
  seen_.erase(recording_key_);
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(dev_.index());
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream_of(dev_), &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a capture cut short is not the next call's error
  cudaSetDevice(prev);
}

void LayerGraphs::invalidate() noexcept {
  if (execs_.empty()) return;
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(dev_.index());
  if (!recording_) cudaStreamSynchronize(stream_of(dev_));  // replays in flight finish first
  for (auto& [key, exec] : execs_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
  execs_.clear();
  cudaSetDevice(prev);
}

void LayerGraphs::fail(const std::string& what, int error) {
  cudaGetLastError();
  if (++failures_ < kMaxFailures) return;
  enabled_ = false;
  off_reason_ = fmt::format("{} failed on cuda:{}: {}", what, dev_.index(),
                            cudaGetErrorString(static_cast<cudaError_t>(error)));
}

}  // namespace pagellm::cuda
