#include "planner/plan_format.h"

#include <fmt/format.h>

#include <array>
#include <vector>

#include "util/enum_names.h"
#include "util/sizes.h"

namespace pagellm {

const char* kv_mode_name(KvMode m) {
  static constexpr std::array<const char*, 4> kNames = {"auto", "kv_tokens", "kv_mem",
                                                        "kv_fraction"};
  static_assert(names_cover(KvMode::kFraction, kNames));
  return enum_name(m, kNames);
}

namespace {

std::string layers_cell(const DevicePlan& d) {
  if (!d.has_layers()) return "-";
  if (d.first_layer == d.last_layer) return std::to_string(d.first_layer);
  return fmt::format("{}-{}", d.first_layer, d.last_layer);
}

}  // namespace

// Sliding-window models: each KV group's tokens and bytes (their sum is the
// table's KV cache), how a window group is sized and what its window saves.
// Each group's bytes per token are its layers' own (KvGroupPlan::token_bytes:
// layers of different KV shapes, none for layers reading another's cache).
// False (nothing written) when the groups do not add up to the table's KV
// cache (a pipeline's stages charge every layer every token).
static bool kv_group_lines(const Plan& p, std::string& out) {
  const auto& g0 = p.kv_groups[0];
  uint64_t sum = 0;
  for (const auto& g : p.kv_groups) sum += g.token_bytes * static_cast<uint64_t>(g.tokens);
  if (g0.layers <= 0 || sum != p.kv_bytes()) return false;
  out += fmt::format(
      "KV groups: the full-attention layers keep every token, window layers their window "
      "(the KV cache column is their sum, {}):\n",
      format_size(sum));
  for (const auto& g : p.kv_groups) {
    const uint64_t per_token = g.token_bytes;
    const uint64_t bytes = per_token * static_cast<uint64_t>(g.tokens);
    // Layers reading the group's caches (KV sharing) add nothing.
    const std::string readers =
        g.shared_layers > 0 ? fmt::format(" (+{} reading their caches)", g.shared_layers) : "";
    if (g.window == 0) {
      out += fmt::format("  {} full-attention layer{}{}: {} tokens x {} = {}\n", g.layers,
                         g.layers == 1 ? "" : "s", readers, format_count(g.tokens),
                         format_size(per_token), format_size(bytes));
      continue;
    }
    const int64_t per_seq = (g.window - 1 + p.block_size - 1) / p.block_size + 2;
    const int64_t seqs_blocks = per_seq * p.max_num_seqs;
    const std::string sizing =
        g.blocks >= g0.blocks
            ? fmt::format("as many blocks as the full-attention layers: {} sequences' windows "
                          "would need more",
                          p.max_num_seqs)
            : fmt::format("per sequence ceil(({} - 1) / {}) + 2 = {} blocks x max_num_seqs {}{}",
                          g.window, p.block_size, per_seq, p.max_num_seqs,
                          g.blocks > seqs_blocks
                              ? fmt::format(", + {} blocks for one step's tokens",
                                            g.blocks - seqs_blocks)
                              : std::string());
    const uint64_t unwindowed = per_token * static_cast<uint64_t>(g0.tokens);
    out += fmt::format(
        "  {} layer{} with window {}{}: {} tokens x {} = {} ({}); keeping every token would take "
        "{}, the window saves {}\n",
        g.layers, g.layers == 1 ? "" : "s", format_count(g.window), readers, format_count(g.tokens),
        format_size(per_token), format_size(bytes), sizing, format_size(unwindowed),
        format_size(unwindowed > bytes ? unwindowed - bytes : 0));
  }
  return true;
}

std::string format_plan_table(const Plan& p) {
  std::string out;
  // Models with recurrent layers get a column for their state.
  const bool state = p.recurrent_layers > 0;
  auto line = [&out](const std::string& name, const std::string& kind, const std::string& layers,
                     const std::vector<std::string>& cells) {
    out += fmt::format("{:<8} {:<5} {:>7}", name, kind, layers);
    for (const std::string& c : cells) out += fmt::format(" {:>11}", c);
    out += "\n";
  };
  std::vector<std::string> head = {"weights", "KV cache", "workspace", "headroom", "free",
                                   "free after"};
  if (state) head.insert(head.begin() + 2, "state");
  line("device", "kind", "layers", head);
  bool shared_note = false;
  for (const auto& d : p.devices) {
    std::vector<std::string> cells;
    for (uint64_t b : {d.weight_bytes, d.kv_bytes, d.workspace_bytes, d.headroom_bytes,
                       d.free_bytes, d.free_after_bytes})
      cells.push_back(format_size(b));
    if (state) cells.insert(cells.begin() + 2, format_size(d.state_bytes));
    line(p.nodes > 1 ? fmt::format("node{}:{}", d.node, d.name()) : d.name(),
         device_kind_name(d.device.kind), layers_cell(d), cells);
    shared_note |= d.device.is_virtual();
  }
  if (shared_note)
    out += "(virtual cpu:N devices share host RAM: host's free after counts their use too)\n";
  if (const uint64_t tier = p.devices.empty() ? 0 : p.devices.back().host_tier_bytes; tier > 0)
    out += fmt::format("KV host tier: {} of host RAM for prefix blocks evicted from the pool "
                       "(--cache-host; in the host's free after)\n",
                       format_size(tier));
  if (const uint64_t staging = p.devices.empty() ? 0 : p.devices.back().disk_staging_bytes;
      staging > 0)
    out += fmt::format("KV disk tier: {} of host RAM to read blocks ahead (--cache-dir; in the "
                       "host's free after)\n",
                       format_size(staging));
  const bool windows = p.kv_groups.size() > 1;
  out += fmt::format("KV cache: {} blocks x {} tokens = {} tokens ({}, {} per token{})\n",
                     format_count(p.num_blocks), p.block_size, format_count(p.kv_tokens),
                     dtype_name(p.kv_type), format_size(p.kv_bytes_per_token),
                     windows ? " in the full-attention layers; the window layers' below" : "");
  if (p.latent_kv)
    out += fmt::format("KV cache kind: latent (MLA), {} x {} values per token and layer = {} per token; "
                       "a GQA cache of the same heads would need {} per token ({:.1f}x)\n",
                       p.n_kv_heads, p.head_dim, format_size(p.kv_bytes_per_token),
                       format_size(p.gqa_kv_bytes_per_token),
                       p.kv_bytes_per_token > 0
                           ? static_cast<double>(p.gqa_kv_bytes_per_token) / p.kv_bytes_per_token
                           : 0.0);
  if (p.shared_kv_layers > 0)
    out += fmt::format("KV sharing: {} of {} layers read an earlier layer's cache and keep none: "
                       "{} per token over all layers instead of {}\n",
                       p.shared_kv_layers, p.n_layer, format_size(p.all_layers_kv_bytes_per_token),
                       format_size(p.unshared_kv_bytes_per_token));
  if (p.kv_groups.size() > 1 && kv_group_lines(p, out)) {
  } else if (p.kv_groups.size() > 1) {
    std::string groups;
    for (const auto& g : p.kv_groups)
      groups += fmt::format("{}{} {} x {} tokens", groups.empty() ? "" : "; ", g.layers,
                            g.window == 0 ? std::string(g.layers == 1 ? "full-attention layer"
                                                                      : "full-attention layers")
                                          : fmt::format("{} with window {}",
                                                        g.layers == 1 ? "layer" : "layers",
                                                        format_count(g.window)),
                            format_count(g.tokens));
    out += fmt::format("KV groups: {} (window layers keep only their window)\n", groups);
  }
  if (state && p.state_checkpoints == 0)
    out += fmt::format(
        "recurrent state: {} of {} layers recurrent (no KV), {} per sequence x {} slots "
        "(max_num_seqs) = {}\n",
        p.recurrent_layers, p.n_layer, format_size(p.state_bytes_per_seq), p.max_num_seqs,
        format_size(p.state_bytes()));
  else if (state)
    out += fmt::format(
        "recurrent state: {} of {} layers recurrent (no KV), {} per sequence x {} slots "
        "(max_num_seqs {} + {} prefix-cache checkpoints, one every {} tokens) = {}\n",
        p.recurrent_layers, p.n_layer, format_size(p.state_bytes_per_seq),
        p.max_num_seqs + p.state_checkpoints, p.max_num_seqs, p.state_checkpoints,
        p.checkpoint_interval, format_size(p.state_bytes()));
  out += fmt::format("max_seq_len {}: {} concurrent full-length sequence{} (max_num_seqs {})\n",
                     format_count(p.max_seq_len), format_count(p.max_concurrent_full_sequences),
                     p.max_concurrent_full_sequences == 1 ? "" : "s", p.max_num_seqs);
  out += fmt::format("layers on the host CPU: {}\n", p.host_layers());
  uint64_t experts = 0, read = 0;
  std::string expert_cells, read_cells;
  for (const auto& d : p.devices) {
    experts += d.expert_bytes;
    read += d.read_bytes_per_token;
    if (d.expert_bytes > 0)
      expert_cells += fmt::format("{}{} {}", expert_cells.empty() ? "" : ", ", d.name(),
                                  format_size(d.expert_bytes));
    if (d.read_bytes_per_token > 0)
      read_cells += fmt::format("{}{} {}", read_cells.empty() ? "" : ", ", d.name(),
                                format_size(d.read_bytes_per_token));
  }
  if (experts > 0) {
    out += fmt::format("experts (of weights): {}", expert_cells);
    if (p.expert_layers_on_host() > 0)
      out += fmt::format("; experts of {} device layer{} on the host ({})",
                         p.expert_layers_on_host(), p.expert_layers_on_host() == 1 ? "" : "s",
                         p.device_map().substr(p.device_map().find("experts:")));
    out += "\n";
  }
  out += fmt::format("weights read per token: {} ({})\n", format_size(read), read_cells);
  out += fmt::format("binding limit: {} ({})\n", binding_limit_name(p.binding_limit),
                     p.binding_detail);
  if (!p.kernel_note.empty())
    out +=
        fmt::format("weight types: {} (layers with them stay on other devices)\n", p.kernel_note);
  return out;
}

std::string format_plan_summary(const Plan& p) {
  const std::string state =
      p.recurrent_layers > 0
          ? fmt::format(", recurrent state {} ({} slots)", format_size(p.state_bytes()), p.max_num_seqs)
          : "";
  return fmt::format("plan: layers {}, KV cache {} tokens ({}, {}){}, max_seq_len {} (binding "
                     "limit: {}; `pagellm plan` shows the whole plan)\n",
                     p.device_map(), format_count(p.kv_tokens), dtype_name(p.kv_type),
                     format_size(p.kv_bytes()), state, format_count(p.max_seq_len),
                     binding_limit_name(p.binding_limit));
}

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : p.devices)
    devices.push_back({{"name", d.name()},
                       {"kind", device_kind_name(d.device.kind)},
                       {"virtual", d.device.is_virtual()},
                       {"first_layer", d.first_layer},
                       {"last_layer", d.last_layer},
                       {"holds_output", d.holds_output},
                       {"weight_bytes", d.weight_bytes},
                       {"kv_bytes", d.kv_bytes},
                       {"state_bytes", d.state_bytes},
                       {"workspace_bytes", d.workspace_bytes},
                       {"headroom_bytes", d.headroom_bytes},
                       {"host_tier_bytes", d.host_tier_bytes},
                       {"disk_staging_bytes", d.disk_staging_bytes},
                       {"free_bytes", d.free_bytes},
                       {"free_after_bytes", d.free_after_bytes},
                       {"expert_bytes", d.expert_bytes},
                       {"read_bytes_per_token", d.read_bytes_per_token},
                       {"node", d.node}});
  nlohmann::json j;
  j["devices"] = devices;
  j["nodes"] = p.nodes;
  j["block_size"] = p.block_size;
  j["num_blocks"] = p.num_blocks;
  j["kv_tokens"] = p.kv_tokens;
  j["kv_type"] = dtype_name(p.kv_type);
  j["kv_bytes_per_token"] = p.kv_bytes_per_token;
  j["kv_cache_kind"] = p.latent_kv ? "latent" : "kv";
  if (p.latent_kv) j["gqa_kv_bytes_per_token"] = p.gqa_kv_bytes_per_token;
  j["shared_kv_layers"] = p.shared_kv_layers;
  j["all_layers_kv_bytes_per_token"] = p.all_layers_kv_bytes_per_token;
  j["unshared_kv_bytes_per_token"] = p.unshared_kv_bytes_per_token;
  j["recurrent_layers"] = p.recurrent_layers;
  j["state_bytes_per_sequence"] = p.state_bytes_per_seq;
  j["state_slots"] = p.recurrent_layers > 0 ? p.max_num_seqs + p.state_checkpoints : 0;
  j["state_checkpoints"] = p.state_checkpoints;
  j["checkpoint_interval_tokens"] = p.checkpoint_interval;
  j["state_bytes"] = p.state_bytes();
  j["host_tier_bytes"] = p.devices.empty() ? 0 : p.devices.back().host_tier_bytes;
  j["disk_staging_bytes"] = p.devices.empty() ? 0 : p.devices.back().disk_staging_bytes;
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : p.kv_groups)
    groups.push_back({{"window", g.window},
                      {"layers", g.layers},
                      {"shared_layers", g.shared_layers},
                      {"bytes_per_token", g.token_bytes},
                      {"tokens", g.tokens}});
  j["kv_groups"] = groups;
  j["kv_mode"] = kv_mode_name(p.kv_mode);
  j["max_seq_len"] = p.max_seq_len;
  j["max_num_seqs"] = p.max_num_seqs;
  j["max_concurrent_full_sequences"] = p.max_concurrent_full_sequences;
  j["binding_limit"] = binding_limit_name(p.binding_limit);
  j["binding_device"] = p.binding_device;
  j["binding_detail"] = p.binding_detail;
  j["device_map"] = p.device_map();
  j["host_layers"] = p.host_layers();
  nlohmann::json expert_layers = nlohmann::json::array();
  for (size_t l = 0; l < p.experts_on_host.size(); ++l)
    if (p.experts_on_host[l]) expert_layers.push_back(l);
  j["experts_on_host"] = expert_layers;
  uint64_t read = 0;
  for (const auto& d : p.devices) read += d.read_bytes_per_token;
  j["read_bytes_per_token"] = read;
  j["manual_map"] = p.manual_map;
  j["kernel_note"] = p.kernel_note;
  return j;
}

nlohmann::json plan_error_to_json(const PlanError& e) {
  return {{"error", e.what()}, {"largest_kv_tokens", e.largest_kv_tokens()}};
}

}  // namespace pagellm
