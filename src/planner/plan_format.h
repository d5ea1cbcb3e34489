// A plan for people (a table with human-readable sizes) and for programs
// (JSON with exact byte counts).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "planner/planner.h"

namespace pagellm {

// One row per device (layers, weights, KV cache, recurrent state when the
// model has recurrent layers, workspace, headroom, free, free after), then
// blocks, tokens of cache, the recurrent layers and their state per sequence,
// concurrent full-length sequences and the binding limit, and the weight
// types a device's kernels lack, if any. Lines end with '\n'.
std::string format_plan_table(const Plan& plan);
// One line for commands that run the model (generate, perplexity): "plan:
// layers 0-4:host, KV cache 512 tokens (f16, 320.00 KiB), max_seq_len 512
// (binding limit: kv_tokens)\n".
std::string format_plan_summary(const Plan& plan);

// {"devices": [{"name", "kind", "virtual", "first_layer", "last_layer",
//   "weight_bytes", "kv_bytes", "state_bytes", "workspace_bytes", "headroom_bytes",
//   "free_bytes", "free_after_bytes", "holds_output"}...],
//  "block_size", "num_blocks", "kv_tokens", "kv_type", "kv_bytes_per_token",
//  "recurrent_layers", "state_bytes_per_sequence", "state_slots" (0 without
//  recurrent layers), "state_bytes" (every device's),
//  "kv_groups": [{"window" (0: full attention), "layers", "tokens"}...],
//  "kv_mode", "max_seq_len", "max_num_seqs", "max_concurrent_full_sequences",
//  "binding_limit", "binding_device", "binding_detail", "device_map",
//  "host_layers", "manual_map", "kernel_note"}
nlohmann::json plan_to_json(const Plan& plan);

// {"error": message, "largest_kv_tokens": n (-1: not even the weights fit)}
nlohmann::json plan_error_to_json(const PlanError& e);

// "auto", "kv_tokens", "kv_mem", "kv_fraction".
const char* kv_mode_name(KvMode m);

}  // namespace pagellm
