// `pagellm bench --roofline`: where the engine stands against the machine's
// memory bandwidth, in one run. Single-stream decode reads every weight once
// per token, so its ceiling is bandwidth / weight bytes per token; prefill and
// batched decode reuse each weight over many tokens and are compute-bound.
//
// Measured: read and triad bandwidth of host RAM (the host backend's probe,
// Backend::measure_host_bandwidth), and the read bandwidth of each device whose
// memory is not host RAM (a GPU's own probe);
// the decode ceiling is 1 / sum over devices of (weight bytes there / that
// bandwidth), the pipeline's time to stream every weight once. Decode tokens/s
// at batch 1 (1 / median inter-token latency, the best of decode_rounds runs,
// as each bandwidth probe keeps its best repeat); prefill tokens/s per prompt
// length (prompt / time to first token); and for each concurrency C, C
// requests at once: the aggregate generated tokens/s end to end and the
// decode-phase rate C / median inter-token latency. Prompts are random and
// the prefix cache should be off, so nothing is served from it.
//
// A shared machine's bandwidth can change from one minute to the next, which
// would make a fraction or a ratio of two figures taken minutes apart
// meaningless. So the host's read bandwidth is probed again right after the
// batch-1 decode and the ceiling uses the higher of the two probes, and batch 1
// is measured again after the concurrency sweep, whose ratios use the faster
// of its two runs; both pairs are reported, so a change shows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/engine.h"

namespace pagellm {

struct RooflineSpec {
  int32_t decode_prompt = 16;
  int32_t decode_gen = 64;
  int32_t decode_rounds = 3;
  std::vector<int32_t> prefill_lens = {128, 512};
  std::vector<int32_t> concurrencies = {1, 4, 16, 64};
  int32_t batch_prompt = 16;
  int32_t batch_gen = 64;
};

struct RooflineResult {
  MemoryBandwidth bandwidth;          // before the batch-1 decode
  double read_bytes_per_s_after = 0;  // the read probe right after it
  double host_read_bytes_per_s = 0;   // the higher of the two: the ceiling's
  uint64_t weight_bytes_per_token = 0;
  struct Device {
    std::string device;
    uint64_t weight_bytes;
    double read_bytes_per_s;  // the CPU's read bandwidth for host-memory devices
    bool own_memory;          // measured on the device (not host RAM)
  };
  std::vector<Device> devices;
  double decode_tokens_per_s = 0;
  double decode_ceiling_tokens_per_s = 0;  // read bandwidth / weight bytes per token
  double decode_fraction = 0;              // of that ceiling
  struct Prefill {
    int32_t prompt_len;
    double tokens_per_s;
  };
  std::vector<Prefill> prefill;
  struct Batched {
    int32_t concurrency;
    double generated_tokens_per_s;  // end to end, prefill included
    double decode_tokens_per_s;     // concurrency / median inter-token latency
  };
  std::vector<Batched> batched;
  // Batch 1 again after the sweep, and the rate the sweep's ratios divide by
  // (the higher of this and the sweep's concurrency-1 figure, or of this alone
  // when the sweep has no concurrency 1).
  double batch1_again_decode_tokens_per_s = 0;
  double batched_base_decode_tokens_per_s = 0;
  // |before - after| / the higher, for the read probes around the decode.
  double bandwidth_change() const;
};

// `host`: a backend on host memory (uses_host_memory()) with the engine's
// thread pool, whose probe measures the host's bandwidth. `shares`: the
// weights one decode step streams on each device (ModelRunner::weight_shares).
// `progress(what)` names each stage as it starts (may be empty).
RooflineResult run_roofline(Engine& engine, Backend& host, int32_t n_vocab,
                            const std::vector<DeviceWeightShare>& shares, const RooflineSpec& spec,
                            const std::function<void(const std::string&)>& progress = {});

}  // namespace pagellm
