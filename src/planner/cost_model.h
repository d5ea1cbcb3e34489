// The planner's model of memory and its exact search over placements, for
// one request over one ordering of the devices (the host last). Internal to
// the planner (planner.h is the interface).
//
// A placement gives each device a contiguous layer range; the host's range is
// the tail. For a block count B, a placement fits when every device's own
// limit holds (memory or its --kv-fraction share, --kv-mem) and the shared
// host-RAM pool (host + virtual CPU devices: the swap guard) holds. Every
// limit grows with B, so the feasible counts of a placement are 0..max, and
// searches binary-search B around an exact feasibility test.
//
// Arithmetic is exact: byte counts in 128-bit integers, --kv-fraction as a
// rational num/den with den = 1e6.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "planner/device_map.h"
#include "planner/planner.h"
#include "planner/state_checkpoint_plan.h"

namespace pagellm::planner_detail {

// A hybrid model's prefix-cache checkpoints under `req` (none: no recurrent
// layer, or prefix caching off): what KvRuntime::checkpoint_plan() allocates.
StateCheckpointPlan checkpoint_plan(const ModelFootprint& fp, const PlanRequest& req);

using i128 = __int128;
constexpr int64_t kNoBound = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxBlocks = std::numeric_limits<int32_t>::max();
constexpr uint64_t kFractionScale = 1000000;  // --kv-fraction resolution: 1e-6

// A limit one placement puts on the block count.
struct Bound {
  int device = 0;       // index into the ordered devices (the host for the shared pool)
  bool shared = false;  // the host-RAM pool of the host and virtual CPU devices
  BindingLimit kind = BindingLimit::kDeviceMemory;
  int64_t max_blocks = kNoBound;  // -1: does not fit even without KV
};

// What a placement lacks at a block count (bytes, or --kv-mem bytes).
struct Deficit {
  int device = 0;
  bool shared = false;
  BindingLimit kind = BindingLimit::kDeviceMemory;
  uint64_t need = 0;
  uint64_t have = 0;
};

class CostModel {
 public:
  CostModel(const PlanRequest& req, const ModelFootprint& fp, std::vector<PlanDevice> devices);

  int n() const { return n_; }
  int k() const { return k_; }
  int host() const { return k_; }
  const std::vector<PlanDevice>& devices() const { return dev_; }
  const PlanDevice& dev(int i) const { return dev_[static_cast<size_t>(i)]; }
  bool shared(int i) const { return dev(i).device.shares_host_memory(); }
  bool fraction() const { return req_.kv_mode == KvMode::kFraction; }

  uint64_t weights(int i, int s, int e) const;
  uint64_t workspace(int i, int s, int e) const;
  // The recurrent state of layers [s, e): each recurrent layer keeps one slot
  // per max_num_seqs where it runs, whatever the block count (so it is fixed
  // here, like weights and workspace, and not under --kv-mem/--kv-fraction).
  uint64_t state(int s, int e) const {
    return state_slot_layer_bytes_ *
           static_cast<uint64_t>(recurrent_prefix_[static_cast<size_t>(e)] -
                                 recurrent_prefix_[static_cast<size_t>(s)]);
  }
  uint64_t fixed(int i, int s, int e) const {
    return weights(i, s, e) + workspace(i, s, e) + state(s, e) + host_tier(i) + disk_staging(i);
  }
  // The prefix cache's host tier: fixed host RAM.
  uint64_t host_tier(int i) const { return i == host() ? req_.host_tier_bytes : 0; }
  // The disk tier's read-ahead staging: fixed host RAM too.
  uint64_t disk_staging(int i) const { return i == host() ? req_.disk_staging_bytes : 0; }
  // KV bytes of layers [s, e) at `blocks`, each layer at its own bytes per
  // token (ModelFootprint::layer_kv_bytes: 0 for a layer that reads another's
  // cache, whose source is charged where the source runs): a full-attention
  // layer holds every block, a sliding-window layer at most its window
  // group's need (kvcache/kv_group.h: window_group_blocks), a recurrent layer
  // none.
  i128 kv(int s, int e, int64_t blocks) const;
  // K + V bytes of one token over the full-attention layers in [s, e)
  // (recurrent layers are not).
  uint64_t full_token_bytes(int s, int e) const {
    return full_prefix_[static_cast<size_t>(e)] - full_prefix_[static_cast<size_t>(s)];
  }
  // The window groups' block needs (blocks a window layer holds at most).
  struct WindowNeed {
    int32_t window = 0;
    int64_t blocks = 0;
    std::vector<uint64_t> prefix;  // bytes per token of this window's layers among the first l
  };

  // The device's own limits (not the shared pool): memory (or the fraction of
  // it) and --kv-mem, and whether its kernels run the range's weight types
  // (runs). The host has only --kv-mem here; its memory is the pool.
  bool own_ok(int i, int s, int e, int64_t blocks) const;
  // How many more bytes of weights device i could hold with layers [s, e) at
  // `blocks` and still meet its own limits (as own_ok); nullopt when it does
  // not meet them already. The host: unbounded here (its memory is the pool).
  std::optional<uint64_t> spare_bytes(int i, int s, int e, int64_t blocks) const;
  // Device i's kernels take every weight type of layers [s, e) and, when it
  // holds the last layer, of the output projection.
  bool runs(int i, int s, int e) const;
  // The first layer of [s, e) whose types device i does not run (n for the
  // output projection) and such a type; nullopt when runs(i, s, e).
  std::optional<std::pair<int, DType>> first_unrunnable(int i, int s, int e) const;
  // A layer that reads an earlier layer's KV cache gets the source's view from
  // the runner, which must be in memory its device addresses: host-memory
  // devices read each other's, a device of its own memory (a GPU) only its
  // own. So a GPU's range [s, e) keeps both or neither of each such layer
  // and its source: the first layer reading across its boundary (in [s, e)
  // with the source before s, or after e with the source in [s, e)); nullopt
  // when none or device i uses host memory. Not monotone in e (a range
  // grown to the reader is fine again), so searches skip such ranges rather
  // than stop at them; own_ok does not include it.
  std::optional<int> detached_kv_layer(int i, int s, int e) const;
  // What the range adds to the shared host-RAM pool, scaled: num*fixed + den*KV.
  i128 shared_cost(int i, int s, int e, int64_t blocks) const {
    if (!shared(i)) return 0;
    return static_cast<i128>(num_) * fixed(i, s, e) + static_cast<i128>(den_) * kv(s, e, blocks);
  }
  i128 pool_limit() const { return static_cast<i128>(num_) * dev(host()).budget_bytes(); }

  // Placements whose host layers are [p, n) for every feasible p, at `blocks`.
  // Exact: a dynamic programme over (accelerator, layers covered) keeping the
  // least shared-pool use, since the pool is the one limit that couples devices.
  struct Dp {
    std::vector<i128> cost;     // (k+1) x (n+1)
    std::vector<int32_t> from;  // start of device j-1's range in the best path to (j, q)
    std::vector<char> host_ok;  // n+1: host layers [p, n) fit
  };
  Dp run(int64_t blocks) const;

  bool host_layers_allowed(int h) const;
  // The fewest host layers of a placement that holds `blocks`, if any.
  std::optional<int> min_host_layers(int64_t blocks) const;
  bool fits_with_host_layers(int64_t blocks, int h) const {
    return run(blocks).host_ok[static_cast<size_t>(n_ - h)] != 0;
  }
  // A placement with h host layers that holds `blocks` (which must fit).
  std::vector<LayerRange> placement(int64_t blocks, int h) const;

  // A placement with h host layers that holds `blocks` (which must fit) and
  // packs layers onto the first devices: each takes as many as it can while
  // the rest still fits. Uses the fewest devices, so the fewest hops.
  std::vector<LayerRange> packed_placement(int64_t blocks, int h) const;

  // An upper bound on any feasible block count.
  int64_t search_limit() const;

  // The limits a fixed placement puts on the block count.
  std::vector<Bound> bounds(const std::vector<LayerRange>& r) const;
  int64_t max_blocks(const std::vector<LayerRange>& r) const;

  // What the placement lacks to hold `blocks`.
  std::vector<Deficit> deficits(const std::vector<LayerRange>& r, int64_t blocks) const;

 private:
  const PlanRequest& req_;
  const ModelFootprint& fp_;
  std::vector<PlanDevice> dev_;
  uint64_t cuda_runtime_host_ = 0;  // the footprint's CUDA runtime bytes when a GPU is planned
  int n_ = 0, k_ = 0;
  std::vector<uint64_t> prefix_;
  // Per device: prefix counts of the layers it cannot run, and whether it
  // runs the output projection's type.
  std::vector<std::vector<int32_t>> unrunnable_prefix_;
  std::vector<char> runs_output_;
  uint64_t min_full_block_bytes_ = 0;  // the least a full-attention layer's block takes (0: none)
  std::vector<uint64_t> full_prefix_;
  std::vector<int32_t> recurrent_prefix_;
  // (n+1) x (n+1): per range [s, e), the first layer reading a cache across
  // its boundary, -1 if none; empty when no layer shares KV.
  std::vector<int32_t> detached_;
  uint64_t state_slot_layer_bytes_ = 0;  // one recurrent layer's state, max_num_seqs slots
  std::vector<WindowNeed> windows_;
  // Largest block count whose KV over `ranges` fits num/den of `room`
  // (kNoBound when it always does).
  int64_t max_blocks_within(uint64_t room, const std::vector<LayerRange>& ranges, uint64_t num,
                            uint64_t den) const;
  uint64_t num_ = 1, den_ = 1;  // the KV fraction, num/den (1 unless --kv-fraction)
};

// Largest b in [0, hi] with fits(b), for fits monotone (true then false); -1 if none.
template <typename F>
int64_t largest_fitting(int64_t hi, F&& fits) {
  if (!fits(0)) return -1;
  int64_t lo = 0;  // fits(lo)
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace pagellm::planner_detail
