// The device and KV-cache flags shared by the commands that plan memory
// (plan; later generate, serve, bench): registers them on a CLI11 subcommand
// and turns them into the planner's inputs.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "device/memory_probe.h"
#include "gguf/gguf_reader.h"
#include "model/hparams.h"
#include "planner/model_footprint.h"
#include "planner/plan_device.h"
#include "planner/planner.h"

namespace pagellm::cli {

struct PlanOptions {
  std::vector<std::string> devices;          // --device cpu:0=2GiB / cuda:0[=SIZE] (repeatable)
  std::string device_map;                    // --device-map "0-11:cpu:0,12-23:host"
  int64_t kv_tokens = 0;                     // -c / --kv-tokens (0: not given)
  std::string kv_mem;                        // --kv-mem SIZE
  double kv_fraction = 0;                    // --kv-fraction F (0: not given)
  std::string kv_type = "f16";               // --kv-type f16|f32|q8_0
  std::string headroom;                      // --headroom SIZE (empty: per-device default)
  int64_t max_seq_len = 0;                   // --max-seq-len (0: the model's trained context)
  int32_t max_num_seqs = 64;                 // --max-num-seqs
  int32_t draft_rows = 0;                    // logit rows for drafted tokens (SpeculationOptions)
  uint64_t host_tier_bytes = 0;              // --cache-host (CacheTierOptions::apply)
  uint64_t disk_staging_bytes = 0;           // --cache-dir's read-ahead (the same)
  int64_t min_kv_tokens = 0;                 // --min-kv-tokens (0: max_seq_len)
  int32_t block_size = 16;                   // --block-size
  int32_t max_batched_tokens = 2048;         // --max-batched-tokens
  int32_t max_prefill_while_decoding = 256;  // --max-prefill-while-decoding (0: no cap)
  bool no_cpu_offload = false;               // --no-cpu-offload
  bool no_gpu_layers = false;                // -ngl 0: no GPU, even where one is found
  bool repack = true;  // from the model options (--no-repack): repacked matrices are counted
  // The plan is for running the model here (generate, chat, serve, bench), not
  // only for showing it (`pagellm plan`). The engine does not run layers on
  // CUDA devices yet, so such plans take no GPU and refuse a declared one.
  bool for_execution = true;

  // Registers all the flags above on `sub` (the three KV requests exclude
  // each other), with llama.cpp's spellings: -b/--batch-size, --parallel,
  // and -ngl, -fa, -ub (cli/llama_compat.h).
  void add_to(CLI::App& sub);

  // Throws ConfigError for a bad value.
  PlanRequest request(const ModelHParams& hp) const;
  FootprintOptions footprint_options() const;
  // The declared devices, measured, and the host.
  std::vector<PlanDevice> measure_devices(MemoryProbe& probe) const;
  // Everything at once: footprint from the file's metadata, devices, plan.
  // Throws PlanError when it does not fit.
  Plan make_plan(const GgufFile& f, const ModelHParams& hp, MemoryProbe& probe) const;
};

}  // namespace pagellm::cli
