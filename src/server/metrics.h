// Server metrics in the Prometheus text format (version 0.0.4): engine
// gauges and counters read from EngineStats at scrape time, latency
// histograms and request counters observed by the HTTP layer.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace pagellm {

// A cumulative histogram over fixed upper bounds (seconds), thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends "# HELP", "# TYPE" and the _bucket/_sum/_count lines of `name`.
  void render(std::string& out, const std::string& name, const std::string& help) const;
  uint64_t count() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// What the server knows at scrape time besides its own counters.
struct MetricsSnapshot {
  bool ready = false;              // the model is loaded
  EngineStats engine;              // valid when ready
  int32_t requests_in_flight = 0;  // engine requests submitted and not finished
  std::string version;             // pagellm_build_info{version="..."} 1; empty: left out
};

class ServerMetrics {
 public:
  ServerMetrics();

  Histogram ttft;         // request received -> first token
  Histogram inter_token;  // between consecutive tokens of one choice
  Histogram e2e;          // request received -> last token

  // One HTTP request answered (route: the matched path, or "other").
  void count_http(const std::string& route, int status);
  // One choice finished ("stop", "length", "abort", "error").
  void count_finish(const std::string& reason);

  std::string render(const MetricsSnapshot& snap) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> http_;
  std::map<std::string, uint64_t> finishes_;
};

}  // namespace pagellm
