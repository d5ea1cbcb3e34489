// Recordings of a CUDA backend's layer runs as CUDA graphs
// (Backend::begin_layers): the ~15 launches per layer of a decode step are
// captured once from the backend's stream and replayed as one launch in later
// steps of the same shape, so the host's launch cost and the gaps between
// small kernels leave the step.
//
// A shape (layer range, tokens, sequences, block-table width) is recorded the
// second time it is met: one-off shapes are not worth a capture. The owner
// calls invalidate() whenever memory a recording may point to moves (a buffer
// freed or grown), which drops every recording. A capture the runtime refuses
// makes the caller run the calls unrecorded; after kMaxFailures of them,
// recording is off for good (off_reason() says why).
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_device.h"

namespace pagellm::cuda {

class LayerGraphs {
 public:
  struct Key {
    int32_t begin = 0, end = 0;  // layer range
    int32_t n_tokens = 0, n_seqs = 0, table_stride = 0;
    auto operator<=>(const Key&) const = default;
  };
  static constexpr size_t kMaxGraphs = 64;
  static constexpr int kMaxFailures = 3;

  // `enabled` false: begin() always answers kRun.
  LayerGraphs(const CudaDevice& dev, bool enabled);
  ~LayerGraphs();
  LayerGraphs(const LayerGraphs&) = delete;
  LayerGraphs& operator=(const LayerGraphs&) = delete;

  // Replays the recording of `k` (kReplayed), starts recording it (kRecord),
  // or neither (kRun). Throws CudaError when a replay cannot be launched.
  Backend::LayerRun begin(const Key& k);
  // Ends the recording and launches it; false when the capture failed
  // (nothing ran).
  bool end();
  // Drops a recording in progress (its shape then counts as not yet met).
  void cancel() noexcept;
  // Drops every recording (after the stream's queued work).
  void invalidate() noexcept;

  bool enabled() const { return enabled_; }
  bool recording() const { return recording_; }
  const std::string& off_reason() const { return off_reason_; }
  int64_t recorded() const { return recorded_; }
  int64_t replayed() const { return replayed_; }

 private:
  void fail(const std::string& what, int error);

  const CudaDevice& dev_;
  bool enabled_;
  std::string off_reason_;
  std::map<Key, void*> execs_;  // cudaGraphExec_t
  std::set<Key> seen_;
  bool recording_ = false;
  Key recording_key_;
  int failures_ = 0;
  int64_t recorded_ = 0, replayed_ = 0;
};

}  // namespace pagellm::cuda
