// Synthetic models and devices for planner tests, and a brute-force planner
// that tries every contiguous placement.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/planner.h"
#include "util/error.h"

namespace pagellm::test {

constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;

// n layers of `layer_bytes` each, KV `kvl` bytes per token per layer.
inline ModelFootprint synth_model(int32_t n, uint64_t layer_bytes, uint64_t kvl,
                                  uint64_t layer_ws = 0, uint64_t host_w = 0, uint64_t out_w = 0) {
  ModelFootprint fp;
  fp.arch = "llama";
  fp.n_layer = n;
  fp.n_ctx_train = 4096;
  fp.n_kv_heads = 8;
  fp.head_dim = 128;
  fp.layer_weight_bytes.assign(static_cast<size_t>(n), layer_bytes);
  fp.host_weight_bytes = host_w;
  fp.output_weight_bytes = out_w;
  fp.output_weight_bytes_on_host = out_w;
  fp.kv_type = DType::F16;
  fp.kv_bytes_per_token_layer = kvl;
  fp.max_batched_tokens = 2048;
  fp.layer_workspace_bytes = layer_ws;
  return fp;
}

// make_plan's ConfigError message ("no error" when it plans).
inline std::string config_error(const PlanRequest& req, const ModelFootprint& fp,
                                const std::vector<PlanDevice>& devs) {
  try {
    make_plan(req, fp, devs);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

inline PlanDevice gpu(int32_t i, uint64_t free, uint64_t headroom = 0) {
  return {Device{DeviceKind::kCuda, i, std::nullopt}, free, headroom};
}
inline PlanDevice vcpu(int32_t i, uint64_t cap, uint64_t headroom = 0) {
  return {Device{DeviceKind::kCpu, i, cap}, cap, headroom};
}
inline PlanDevice host(uint64_t free, uint64_t headroom = 0) {
  return {Device::host(), free, headroom};
}

inline PlanRequest request(int64_t max_seq_len, int32_t max_num_seqs, int32_t block_size = 16) {
  PlanRequest r;
  r.max_seq_len = max_seq_len;
  r.max_num_seqs = max_num_seqs;
  r.block_size = block_size;
  return r;
}

// Every placement of n layers in contiguous ranges over the devices in order
// (empty ranges allowed; the host, last, gets the tail).
inline std::vector<std::vector<LayerRange>> all_placements(int32_t n, size_t n_devices) {
  std::vector<std::vector<LayerRange>> out;
  std::vector<LayerRange> cur(n_devices);
  auto rec = [&](auto&& self, size_t i, int32_t start) -> void {
    if (i + 1 == n_devices) {
      cur[i] = {start, n};
      out.push_back(cur);
      return;
    }
    for (int32_t e = start; e <= n; ++e) {
      cur[i] = {start, e};
      self(self, i + 1, e);
    }
  };
  rec(rec, 0, 0);
  return out;
}

// What make_plan should return, by trying every placement.
struct Expected {
  bool fits = false;
  int64_t blocks = 0;       // when it fits
  int32_t host_layers = 0;  // when it fits
  int64_t largest = -1;     // blocks of the largest plan that fits (for refusals)
};

// Every placement in every order of the accelerators (the host last), or
// only the given order when `all_orders` is false.
inline Expected brute_force(const PlanRequest& req, const ModelFootprint& fp,
                            std::vector<PlanDevice> devices, bool all_orders = true) {
  const int32_t n = fp.n_layer;
  const int64_t bs = req.block_size;
  const int64_t per_seq = (req.max_seq_len + bs - 1) / bs;
  // The default cache without a GPU: four full-length sequences at most.
  bool gpu = false;
  for (const auto& d : devices) gpu = gpu || d.device.kind == DeviceKind::kCuda;
  const int64_t seqs = req.kv_mode == KvMode::kAuto && !gpu
                           ? std::min<int64_t>(req.max_num_seqs, 4)
                           : req.max_num_seqs;
  const int64_t cap = std::min<int64_t>(INT32_MAX, per_seq * seqs);
  const int64_t min_tokens = req.min_kv_tokens > 0 ? req.min_kv_tokens : req.max_seq_len;
  const int64_t min_blocks = std::max<int64_t>(1, (min_tokens + bs - 1) / bs);
  const size_t k = devices.size() - 1;
  auto allowed = [&](int32_t h) {
    if (k == 0) return h == n;
    if (req.no_cpu_offload) return h == 0;
    return true;
  };
  struct Option {
    int32_t h;
    int64_t blocks;
  };
  std::vector<Option> opts;
  std::vector<size_t> perm(k);
  for (size_t i = 0; i < k; ++i) perm[i] = i;
  do {
    std::vector<PlanDevice> order;
    for (size_t i : perm) order.push_back(devices[i]);
    order.push_back(devices.back());
    for (const auto& r : all_placements(n, order.size())) {
      const int32_t h = r.back().size();
      if (!allowed(h)) continue;
      opts.push_back({h, max_blocks_for_placement(req, fp, order, r)});
    }
  } while (all_orders && std::next_permutation(perm.begin(), perm.end()));
  Expected e;
  for (const auto& o : opts) e.largest = std::max(e.largest, o.blocks);
  auto min_h_at = [&](int64_t b) -> std::optional<int32_t> {
    std::optional<int32_t> best;
    for (const auto& o : opts)
      if (o.blocks >= b && (!best || o.h < *best)) best = o.h;
    return best;
  };
  auto most_with_h = [&](int32_t h) {
    int64_t m = -1;
    for (const auto& o : opts)
      if (o.h == h) m = std::max(m, o.blocks);
    return m;
  };
  if (req.kv_mode == KvMode::kTokens) {
    const int64_t target = std::min<int64_t>((req.kv_tokens + bs - 1) / bs, cap);
    if (auto h = min_h_at(target)) {
      e.fits = true;
      e.blocks = target;
      e.host_layers = *h;
    } else if (req.no_cpu_offload && e.largest >= std::min(min_blocks, target)) {
      e.fits = true;
      e.blocks = e.largest;
      e.host_layers = 0;
    }
    return e;
  }
  const int64_t floor = std::min(min_blocks, cap);
  if (auto h = min_h_at(floor)) {
    e.fits = true;
    e.host_layers = *h;
    e.blocks = std::min(most_with_h(*h), cap);
  }
  return e;
}

// A recurrent layer's state where it runs: one slot per max_num_seqs.
inline uint64_t naive_layer_state(const PlanRequest& req, const ModelFootprint& fp, int32_t layer) {
  const bool recurrent =
      static_cast<size_t>(layer) < fp.layer_recurrent.size() && fp.layer_recurrent[layer];
  return recurrent ? fp.state_bytes_per_seq_layer * static_cast<uint64_t>(req.max_num_seqs) : 0;
}

// Checks a plan against every budget; returns what is exceeded ("" when none).
// A layer's KV blocks at `blocks`, naively: a window layer holds at most what
// max_num_seqs sequences reading W-1 earlier positions plus one step of
// max_batched_tokens tokens can span (ceil((W-1)/bs) + 2 blocks each, plus
// the step's tokens), a full-attention layer every block.
inline int64_t naive_layer_blocks(const PlanRequest& req, const ModelFootprint& fp, int32_t layer,
                                  int64_t blocks) {
  if (static_cast<size_t>(layer) < fp.layer_recurrent.size() && fp.layer_recurrent[layer])
    return 0;  // a recurrent layer keeps a state, no K/V
  const int32_t w =
      static_cast<size_t>(layer) < fp.layer_windows.size() ? fp.layer_windows[layer] : 0;
  if (w <= 0) return blocks;
  const int64_t bs = req.block_size;
  const int64_t need = req.max_num_seqs * ((w - 1 + bs - 1) / bs + 2) +
                       (fp.max_batched_tokens + bs - 1) / bs;
  return std::min(blocks, need);
}

inline std::string budget_violations(const Plan& p, const PlanRequest& req,
                                     const std::vector<PlanDevice>& devices,
                                     const ModelFootprint* fp = nullptr) {
  std::string bad;
  auto find = [&](const Device& d) -> const PlanDevice& {
    for (const auto& x : devices)
      if (x.device == d) return x;
    throw std::runtime_error("device not in the input");
  };
  const uint64_t num = req.kv_mode == KvMode::kFraction
                           ? static_cast<uint64_t>(std::llround(req.kv_fraction * 1e6))
                           : 1;
  const uint64_t den = req.kv_mode == KvMode::kFraction ? 1000000 : 1;
  unsigned __int128 pool_fixed = 0, pool_kv = 0;
  int32_t covered = 0;
  std::vector<LayerRange> ranges;
  for (const auto& d : p.devices) {
    const PlanDevice& in = find(d.device);
    // Weights, workspace and the recurrent state do not grow with the cache.
    // The prefix cache's host tier and the disk tier's staging too
    // (--cache-host, --cache-dir: the host only).
    const uint64_t fixed = d.weight_bytes + d.workspace_bytes + d.state_bytes + d.host_tier_bytes +
                           d.disk_staging_bytes;
    if (d.host_tier_bytes != (d.device.is_host() ? req.host_tier_bytes : 0))
      bad += d.name() + ": host tier bytes not as asked; ";
    if (d.disk_staging_bytes != (d.device.is_host() ? req.disk_staging_bytes : 0))
      bad += d.name() + ": disk staging bytes not as asked; ";
    uint64_t want_kv = static_cast<uint64_t>(d.n_layers()) * p.kv_bytes_per_token / p.n_layer *
                       p.block_size * p.num_blocks;
    uint64_t want_state = 0;
    if (fp) {
      want_kv = 0;
      for (int32_t l = d.first_layer; d.has_layers() && l <= d.last_layer; ++l) {
        // The layer's own bytes per token as the footprint lists them (0: it
        // reads another layer's cache); a uniform footprint lists none.
        const uint64_t own = fp->layer_kv_bytes_per_token.empty()
                                 ? fp->kv_bytes_per_token_layer
                                 : fp->layer_kv_bytes_per_token[static_cast<size_t>(l)];
        want_kv += own * static_cast<uint64_t>(p.block_size) *
                   static_cast<uint64_t>(naive_layer_blocks(req, *fp, l, p.num_blocks));
        want_state += naive_layer_state(req, *fp, l);
      }
    }
    if (d.kv_bytes != want_kv) bad += d.name() + ": KV bytes do not match the layer count; ";
    if (d.state_bytes != want_state)
      bad += d.name() + ": recurrent state bytes do not match its recurrent layers; ";
    if (d.used_bytes() != fixed + d.kv_bytes) bad += d.name() + ": used bytes leave a part out; ";
    if (req.kv_mode == KvMode::kMemory && d.kv_bytes > req.kv_mem_bytes)
      bad += d.name() + ": over --kv-mem; ";
    if (d.device.shares_host_memory()) {
      pool_fixed += fixed;
      pool_kv += d.kv_bytes;
    }
    if (!d.device.is_host()) {
      if (d.used_bytes() > in.budget_bytes()) bad += d.name() + ": over its budget; ";
      if (fixed > in.budget_bytes() ||
          static_cast<unsigned __int128>(den) * d.kv_bytes >
              static_cast<unsigned __int128>(num) * (in.budget_bytes() - fixed))
        bad += d.name() + ": over its KV share; ";
    }
    if (d.has_layers()) ranges.push_back({d.first_layer, d.last_layer + 1});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const LayerRange& a, const LayerRange& b) { return a.begin < b.begin; });
  for (const auto& r : ranges) {
    if (r.begin != covered) bad += "layers not covered once; ";
    covered = r.end;
  }
  if (covered != p.n_layer) bad += "not every layer is placed; ";
  const uint64_t hb = devices.back().budget_bytes();
  if (pool_fixed + pool_kv > hb) bad += "host RAM pool over its budget (swap guard); ";
  if (pool_fixed > hb || static_cast<unsigned __int128>(den) * pool_kv >
                             static_cast<unsigned __int128>(num) * (hb - pool_fixed))
    bad += "host RAM pool over its KV share; ";
  return bad;
}

}  // namespace pagellm::test
