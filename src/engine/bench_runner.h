// Closed-loop load on an in-process engine: keeps `concurrency` requests in
// flight until `requests` have finished, and measures throughput, time to
// first token, inter-token latency, KV waste and prefix-cache hits.
#pragma once

#include "grammar/grammar.h"

#include <cstdint>
#include <functional>
#include <string>

#include "engine/engine.h"

namespace pagellm {

struct BenchSpec {
  int32_t concurrency = 1;
  int32_t requests = 8;
  int32_t prompt_len = 128;
  int32_t gen_len = 64;
  int32_t shared_prefix = 0;  // tokens every prompt starts with
  uint64_t seed = 1;
  std::shared_ptr<const Grammar> grammar;  // every request's output constraint, if any
};

struct BenchResult {
  int32_t requests = 0;
  int32_t concurrency = 0;
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
  double duration_s = 0;
  double requests_per_s = 0;
  double generated_tokens_per_s = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0;
  double itl_p50_s = 0, itl_p99_s = 0;
  double kv_waste_ratio = 0;       // mean over steps of unused/allocated slots
  double kv_peak_usage_ratio = 0;  // peak used blocks / total
  double prefix_hit_rate = 0;      // prefix-cache block hits / queries
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  // Every request's generated ids, hashed in request order: the same load
  // run two ways (e.g. with and without speculation) must give the same.
  uint64_t output_hash = 0;
};

// `progress(done, total)` is called as requests finish (may be empty).
BenchResult run_bench(Engine& engine, int32_t n_vocab, const BenchSpec& spec,
                      const std::function<void(int32_t, int32_t)>& progress = {});

}  // namespace pagellm
