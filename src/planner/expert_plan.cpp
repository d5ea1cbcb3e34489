#include "planner/expert_plan.h"

#include <algorithm>

#include "planner/cost_model.h"

namespace pagellm::planner_detail {

ModelFootprint with_experts_on_host(const ModelFootprint& fp, const std::vector<bool>& on_host) {
  ModelFootprint out = fp;
  bool any = false;
  for (size_t l = 0; l < on_host.size() && l < fp.layer_expert_bytes.size(); ++l) {
    if (!on_host[l] || fp.layer_expert_bytes[l] == 0) continue;
    out.layer_weight_bytes[l] -= fp.layer_expert_bytes[l];
    out.host_weight_bytes += fp.layer_expert_bytes[l];
    any = true;
  }
  if (any) out.host_workspace_bytes += fp.host_expert_workspace_bytes;
  return out;
}

void annotate_weights(Plan& p, const ModelFootprint& fp, const std::vector<bool>& on_host) {
  p.experts_on_host.clear();
  uint64_t moved = 0;
  std::vector<bool> remote(static_cast<size_t>(p.n_layer), false);
  for (auto& d : p.devices) {
    d.expert_bytes = 0;
    if (!d.has_layers()) continue;
    for (int32_t l = d.first_layer; l <= d.last_layer; ++l) {
      const uint64_t x = static_cast<size_t>(l) < fp.layer_expert_bytes.size()
                             ? fp.layer_expert_bytes[static_cast<size_t>(l)]
                             : 0;
      const bool away = !d.device.is_host() && static_cast<size_t>(l) < on_host.size() &&
                        on_host[static_cast<size_t>(l)] && x > 0;
      if (away) {
        moved += x;
        remote[static_cast<size_t>(l)] = true;
      } else {
        d.expert_bytes += x;
      }
    }
  }
  if (moved > 0) {
    p.devices.back().expert_bytes += moved;  // the host is last
    p.experts_on_host = remote;
  }
  for (auto& d : p.devices) {
    const uint64_t unread_experts = static_cast<uint64_t>(
        static_cast<double>(d.expert_bytes) * (1.0 - fp.expert_read_fraction));
    uint64_t read = d.weight_bytes - std::min(d.weight_bytes, unread_experts);
    // The embedding is read by rows, unless it is also the output projection here.
    if (d.device.is_host() && !(fp.tied_output && d.holds_output))
      read -= std::min(read, fp.embedding_bytes);
    d.read_bytes_per_token = read;
  }
}

int64_t floor_blocks(const PlanRequest& req, const std::vector<PlanDevice>& devices) {
  const int64_t bs = req.block_size;
  const int64_t per_seq = (req.max_seq_len + bs - 1) / bs;
  int64_t seqs = req.max_num_seqs;
  bool gpu = false;
  for (const auto& d : devices) gpu = gpu || d.device.kind == DeviceKind::kCuda;
  if (req.kv_mode == KvMode::kAuto && !gpu) seqs = std::min<int64_t>(seqs, kHostDefaultSeqs);
  const int64_t cap = per_seq > kMaxBlocks / seqs ? kMaxBlocks : per_seq * seqs;
  const int64_t min_tokens = req.min_kv_tokens > 0 ? req.min_kv_tokens : req.max_seq_len;
  const int64_t min_blocks = std::max<int64_t>(1, (min_tokens + bs - 1) / bs);
  return std::min(min_blocks, cap);
}

namespace {

// The plan's devices (pipeline order, the host last) as the input lists them,
// and their layer ranges.
void plan_order(const Plan& p, const std::vector<PlanDevice>& devices,
                std::vector<PlanDevice>& ordered, std::vector<LayerRange>& ranges) {
  for (const auto& d : p.devices) {
    for (const auto& in : devices)
      if (in.device == d.device) ordered.push_back(in);
    ranges.push_back(d.has_layers() ? LayerRange{d.first_layer, d.last_layer + 1} : LayerRange{});
  }
}

}  // namespace

Plan make_expert_plan(const PlanRequest& req, const ModelFootprint& fp,
                      const std::vector<PlanDevice>& devices) {
  const int32_t n = fp.n_layer;
  if (req.device_map) {
    std::vector<bool> on_host = resolve_expert_map(*req.device_map, n);
    PlanRequest layers = req;
    layers.device_map->erase(
        std::remove_if(layers.device_map->begin(), layers.device_map->end(),
                       [](const DeviceMapEntry& e) { return e.experts; }),
        layers.device_map->end());
    Plan p = make_layer_plan(layers, with_experts_on_host(fp, on_host), devices);
    annotate_weights(p, fp, on_host);
    return p;
  }
  if (req.no_cpu_offload) {  // experts stay with their layers: nothing goes to the host
    Plan p = make_layer_plan(req, fp, devices);
    annotate_weights(p, fp, {});
    return p;
  }
  // 1. Attention and KV first: every expert on the host.
  std::vector<bool> on_host(static_cast<size_t>(n), true);
  const Plan first = make_layer_plan(req, with_experts_on_host(fp, on_host), devices);
  std::vector<PlanDevice> ordered;
  std::vector<LayerRange> ranges;
  plan_order(first, devices, ordered, ranges);
  // 2. Experts back with their layers, device by device, as many as keep the
  // cache floor (or the cache asked for).
  const int64_t keep = req.kv_mode == KvMode::kTokens
                           ? first.num_blocks
                           : std::min<int64_t>(floor_blocks(req, devices), first.num_blocks);
  auto holds = [&](const std::vector<bool>& flags) {
    return max_blocks_for_placement(req, with_experts_on_host(fp, flags), ordered, ranges) >= keep;
  };
  for (size_t i = 0; i < ranges.size(); ++i) {
    const LayerRange r = ranges[i];
    if (r.empty()) continue;
    if (ordered[i].device.is_host()) {
      for (int32_t l = r.begin; l < r.end; ++l) on_host[static_cast<size_t>(l)] = false;
      continue;
    }
    // The most of its layers (from its first) whose experts fit: binary search.
    auto keep_first = [&](int32_t c) {
      std::vector<bool> f = on_host;
      for (int32_t l = r.begin; l < r.begin + c; ++l) f[static_cast<size_t>(l)] = false;
      return f;
    };
    int32_t lo = 0, hi = r.size();
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo + 1) / 2;
      if (holds(keep_first(mid)))
        lo = mid;
      else
        hi = mid - 1;
    }
    on_host = keep_first(lo);
  }
  // 3. The cache grows into what is left: the same layer ranges, as a map.
  PlanRequest pinned = req;
  pinned.device_map = DeviceMap{};
  for (size_t i = 0; i < ranges.size(); ++i)
    if (!ranges[i].empty())
      pinned.device_map->push_back({ranges[i].begin, ranges[i].end - 1, ordered[i].device});
  Plan p = make_layer_plan(pinned, with_experts_on_host(fp, on_host), ordered);
  p.manual_map = false;
  annotate_weights(p, fp, on_host);
  return p;
}

}  // namespace pagellm::planner_detail
