#include "planner/expert_plan.h"

#include <algorithm>
#include <optional>

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

// The accelerators' split of the layers they hold in `ranges` that lets
// them keep the most expert bytes (each device the experts of its first
// layers, as far as its own limits allow at `blocks`); the host's range stays.
// A dynamic programme over (device, layers covered); the shared host-RAM pool
// is checked by the caller. nullopt when no split meets the devices' limits.
std::optional<std::vector<LayerRange>> ranges_for_experts(const PlanRequest& req,
                                                          const ModelFootprint& fp,
                                                          const std::vector<PlanDevice>& ordered,
                                                          const std::vector<LayerRange>& ranges,
                                                          int64_t blocks) {
  const int32_t n = fp.n_layer;
  const std::vector<bool> all(static_cast<size_t>(n), true);
  const ModelFootprint attention = with_experts_on_host(fp, all);
  const CostModel m(req, attention, ordered);
  const int k = m.k();
  const int32_t covered = ranges.back().empty() ? n : ranges.back().begin;  // accelerators: [0, covered)
  std::vector<uint64_t> prefix(static_cast<size_t>(n) + 1, 0);
  for (int32_t l = 0; l < n; ++l)
    prefix[static_cast<size_t>(l) + 1] = prefix[static_cast<size_t>(l)] + fp.layer_expert_bytes[static_cast<size_t>(l)];
  // Expert bytes of the longest prefix of [p, q) within `room`.
  auto kept = [&](int32_t p, int32_t q, uint64_t room) {
    const auto first = prefix.begin() + p;
    const auto last = std::upper_bound(first, prefix.begin() + q + 1, prefix[static_cast<size_t>(p)] + room);
    return *(last - 1) - prefix[static_cast<size_t>(p)];
  };
  const size_t W = static_cast<size_t>(covered) + 1;
  std::vector<int64_t> best((static_cast<size_t>(k) + 1) * W, -1);
  std::vector<int32_t> from((static_cast<size_t>(k) + 1) * W, -1);
  best[0] = 0;
  for (int j = 0; j < k; ++j)
    for (int32_t p = 0; p <= covered; ++p) {
      const int64_t base = best[static_cast<size_t>(j) * W + static_cast<size_t>(p)];
      if (base < 0) continue;
      for (int32_t q = p; q <= covered; ++q) {
        const auto spare = m.spare_bytes(j, p, q, blocks);
        if (!spare) break;  // a longer range only needs more
        if (m.detached_kv_layer(j, p, q)) continue;  // a GPU keeps KV readers with their sources
        const int64_t v = base + static_cast<int64_t>(kept(p, q, *spare));
        int64_t& b = best[static_cast<size_t>(j + 1) * W + static_cast<size_t>(q)];
        if (v > b) {
          b = v;
          from[static_cast<size_t>(j + 1) * W + static_cast<size_t>(q)] = p;
        }
      }
    }
  if (best[static_cast<size_t>(k) * W + static_cast<size_t>(covered)] < 0) return std::nullopt;
  std::vector<LayerRange> out = ranges;
  for (int32_t j = k, q = covered; j >= 1; --j) {
    const int32_t p = from[static_cast<size_t>(j) * W + static_cast<size_t>(q)];
    out[static_cast<size_t>(j - 1)] = {p, q};
    q = p;
  }
  return out;
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
  // cache floor (or the cache asked for). The accelerators' ranges are
  // re-split so that they can keep the most expert bytes.
  const int64_t keep = req.kv_mode == KvMode::kTokens
                           ? first.num_blocks
                           : std::min<int64_t>(floor_blocks(req, devices), first.num_blocks);
  auto holds_with = [&](const std::vector<bool>& flags, const std::vector<LayerRange>& r) {
    return max_blocks_for_placement(req, with_experts_on_host(fp, flags), ordered, r) >= keep;
  };
  if (auto r = ranges_for_experts(req, fp, ordered, ranges, keep);
      r && holds_with(on_host, *r))
    ranges = *r;
  auto holds = [&](const std::vector<bool>& flags) { return holds_with(flags, ranges); };
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
