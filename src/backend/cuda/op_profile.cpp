#include "backend/cuda/op_profile.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace pagellm::cuda {

void OpStats::add(const std::string& op, double ms) {
  Stat& s = ops_[op];
  ++s.calls;
  s.ms += ms;
}

double OpStats::total_ms() const {
  double t = 0;
  for (const auto& [op, s] : ops_) t += s.ms;
  return t;
}

std::string OpStats::table() const {
  std::vector<std::pair<std::string, Stat>> rows(ops_.begin(), ops_.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  size_t w = 9;
  for (const auto& r : rows) w = std::max(w, r.first.size());
  const double total = total_ms();
  std::string out = fmt::format("{:<{}}  {:>8}  {:>10}  {:>9}  {:>6}\n", "operation", w, "calls",
                                "total ms", "mean us", "share");
  for (const auto& [op, s] : rows)
    out += fmt::format("{:<{}}  {:>8}  {:>10.3f}  {:>9.2f}  {:>5.1f}%\n", op, w, s.calls, s.ms,
                       1e3 * s.ms / static_cast<double>(s.calls),
                       total > 0 ? 100.0 * s.ms / total : 0.0);
  out += fmt::format("{:<{}}  {:>8}  {:>10.3f}\n", "all", w, "", total);
  return out;
}

OpProfile::~OpProfile() {
  // Events may still be pending on the stream: it is drained first; errors
  // cannot be reported here.
  cudaStreamSynchronize(static_cast<cudaStream_t>(dev_.stream()));
  for (const Pending& p : pending_) {
    cudaEventDestroy(static_cast<cudaEvent_t>(p.start));
    cudaEventDestroy(static_cast<cudaEvent_t>(p.stop));
  }
  if (start_) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  for (void* e : pool_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

void* OpProfile::event() {
  if (!pool_.empty()) {
    void* e = pool_.back();
    pool_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreate(&e), "cudaEventCreate", dev_.index());
  return e;
}

void OpProfile::begin(const std::string& op) {
  if (depth_ > 0) {
    ++depth_;
    return;
  }
  dev_.make_current();
  void* start = event();
  if (cudaEventRecord(static_cast<cudaEvent_t>(start), static_cast<cudaStream_t>(dev_.stream())) !=
      cudaSuccess) {
    pool_.push_back(start);
    check_cuda(cudaGetLastError(), "cudaEventRecord", dev_.index());
  }
  op_ = op;
  start_ = start;
  depth_ = 1;
}

void OpProfile::end() {
  if (depth_ == 0 || --depth_ > 0) return;
  void* stop = event();
  pending_.push_back({op_, start_, stop});
  start_ = nullptr;
  check_cuda(
      cudaEventRecord(static_cast<cudaEvent_t>(stop), static_cast<cudaStream_t>(dev_.stream())),
      "cudaEventRecord", dev_.index());
}

void OpProfile::collect() {
  if (pending_.empty()) return;
  dev_.make_current();
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(pending_.back().stop)),
             "cudaEventSynchronize", dev_.index());
  for (const Pending& p : pending_) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(p.start),
                                    static_cast<cudaEvent_t>(p.stop)),
               "cudaEventElapsedTime", dev_.index());
    stats_.add(p.op, ms);
    pool_.push_back(p.start);
    pool_.push_back(p.stop);
  }
  pending_.clear();
}

}  // namespace pagellm::cuda
