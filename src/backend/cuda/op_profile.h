// Time per backend operation on a GPU, to see where a step's time goes
// (PAGELLM_CUDA_PROFILE=1 on a CudaBackend; recorded steps are then off,
// since a replayed step is one launch). Each top-level operation is bracketed
// by two events on the backend's stream; their elapsed times are collected
// once the stream has passed them (at the next step, or for the report), so
// profiling adds no synchronization inside a step. Operations called from
// inside another (a fallback's parts) count as their caller's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"

namespace pagellm::cuda {

// The table of an OpProfile: calls and total time per operation name.
class OpStats {
 public:
  void add(const std::string& op, double ms);
  // One line per operation, the largest total first: name, calls, total ms,
  // mean microseconds, share of all operations' time; then the total.
  std::string table() const;
  double total_ms() const;
  bool empty() const { return ops_.empty(); }

 private:
  struct Stat {
    int64_t calls = 0;
    double ms = 0;
  };
  std::map<std::string, Stat> ops_;
};

class OpProfile {
 public:
  explicit OpProfile(const CudaDevice& dev) : dev_(dev) {}
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Brackets an operation on the stream; nested begin/end pairs are not timed
  // on their own. Throws CudaError when an event cannot be made or recorded.
  void begin(const std::string& op);
  void end();
  // Waits for the stream and adds every bracketed operation to stats().
  void collect();
  const OpStats& stats() const { return stats_; }

 private:
  void* event();  // from the pool, or a new one

  struct Pending {
    std::string op;
    void* start;
    void* stop;
  };
  const CudaDevice& dev_;
  int depth_ = 0;
  std::string op_;
  void* start_ = nullptr;
  std::vector<Pending> pending_;
  std::vector<void*> pool_;
  OpStats stats_;
};

}  // namespace pagellm::cuda
