// The memory planner: from the model's footprint, the devices' free memory and
// the user's KV request, decides which device holds which layers and how many
// KV blocks there are. Pure: no I/O, nothing allocated; unit-testable.
//
// Model of memory. Devices are ordered as in the pipeline, the host last. A
// device holding layers [s, e) uses
//   weights of its layers + layer workspace (when e > s)
//   + output norm/projection and logits workspace (when it holds the last layer)
//   + token embedding and host workspace (the host only)
//   + KV: each layer's own K + V bytes per token * block_size * num_blocks
//     (a sliding-window layer at most its window's blocks, a recurrent layer
//     and a layer that reads an earlier layer's cache none)
//   + recurrent state: recurrent layers in [s, e) * state bytes per sequence
//     * max_num_seqs (the engine's slots; fixed, not under --kv-mem/--kv-fraction).
// One block count for all devices (a block id is a slot range in every
// layer's pool), so the count is what the tightest device allows.
// Constraints:
//   * every non-host device: its use <= free - headroom;
//   * swap guard: the host and all virtual CPU devices share host RAM, so the
//     sum of their uses <= the host's free (MemAvailable or cgroup room)
//     - headroom. Weights are mmap'd but counted as resident. Swap never counts;
//   * --kv-mem S: the KV of each device <= S;
//   * --kv-fraction F: on each device KV <= F * (budget - weights - workspace - state),
//     and over host RAM, total shared KV <= F * (host budget - shared fixed use).
//
// Mixture of experts (a footprint with expert bytes): per layer, attention
// (with its KV) and the expert stacks are separate units. Without a map and
// without --no-cpu-offload: the plan is first made with every expert on the
// host (so attention and KV take the devices: fewest host layers, the cache
// as below); then, device by device in pipeline order, each device takes back
// the experts of as many of its layers (from its first) as fit with the cache
// floor (--kv-tokens: the cache asked for); the cache then grows into what is
// left (not beyond the --kv-tokens request). --device-map entries
// "experts:FIRST-LAST:host" pin experts to the host.
//
// Placement (without --device-map): accelerators (GPUs and virtual CPU
// devices) in a pipeline order, then the host; layers are split into
// contiguous ranges in that order, so host layers are the last ones ("CPU
// offload"). The order is part of the search (the device with the last
// layers also carries the output head and its workspace): every distinct
// order of the accelerators (up to 720 of them; beyond, the given order, the
// most-free-first order and that order with each device moved last), the
// best plan wins (fewest host layers, then most blocks), and the given order
// wins ties. --device-map pins the order. Requests:
//   --kv-tokens N: reserve the cache first: blocks = ceil(N / block_size)
//     (capped at max_seq_len x max_num_seqs), then the placement with the
//     fewest host layers that fits, packing layers onto the first devices
//     (each takes as many as it can while the rest still fits). With
//     --no-cpu-offload the cache shrinks instead (down to --min-kv-tokens).
//   none, --kv-mem, --kv-fraction: the cache is as large as fits, capped at
//     max_seq_len x max_num_seqs tokens. Layers go to the host only as far as
//     needed to keep --min-kv-tokens (default: one sequence of max_seq_len)
//     of cache; then the block count is maximised for that number of host
//     layers, balancing layers across unequal accelerators.
// In all modes, the accelerators' ranges are chosen by an exact search (a
// dynamic programme over devices x layers, inside a binary search on the
// block count), so the count is the optimum among contiguous placements in
// every order tried.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvcache/kv_cache_storage.h"
#include "kvcache/kv_pool.h"
#include "planner/device_map.h"
#include "planner/model_footprint.h"
#include "planner/plan_device.h"
#include "util/error.h"

namespace pagellm {

enum class KvMode {
  kAuto,      // no request: as large as fits, capped at max_seq_len x max_num_seqs
              // (x min(max_num_seqs, kHostDefaultSeqs) when no GPU is planned: host RAM
              // is shared with everything else)
  kTokens,    // --kv-tokens N / -c N
  kMemory,    // --kv-mem SIZE: at most SIZE of cache on any one device
  kFraction,  // --kv-fraction F: fraction F of what is free after weights
};

// Full-length sequences the default (kAuto) cache holds without a GPU, as
// llama-server's default slot count.
constexpr int32_t kHostDefaultSeqs = 4;

struct PlanRequest {
  KvMode kv_mode = KvMode::kAuto;
  int64_t kv_tokens = 0;      // kTokens
  uint64_t kv_mem_bytes = 0;  // kMemory
  double kv_fraction = 0;     // kFraction, in (0, 1]
  int32_t block_size = 16;
  int64_t max_seq_len = 0;  // 0: the model's trained context
  int32_t max_num_seqs = 64;
  // Hybrid models: the prefix cache's state checkpoints are charged too
  // (planner/state_checkpoint_plan.h). The commands set it (serving and
  // benchmarks cache prefixes unless --no-prefix-cache; the charge is then an
  // upper bound); off here so that a bare request plans the sequences' state only.
  bool prefix_caching = false;
  int64_t min_kv_tokens = 0;  // 0: max_seq_len
  bool no_cpu_offload = false;
  std::optional<DeviceMap> device_map;  // overrides the placement
  // The prefix cache's host tier (--cache-host, kvcache/host_tier.h): host
  // RAM charged like the host's workspace (under the swap guard).
  uint64_t host_tier_bytes = 0;
  // The disk tier's read-ahead staging (--cache-dir: DiskTierOptions::
  // prefetch_bytes, kvcache/block_prefetch.h): host RAM charged the same way.
  uint64_t disk_staging_bytes = 0;
};

// What limited the number of blocks.
enum class BindingLimit {
  kSeqCap,        // max_seq_len x max_num_seqs: more would not be used
  kKvTokens,      // the --kv-tokens request itself
  kDeviceMemory,  // a device's free memory minus headroom
  kHostMemory,    // host RAM shared by the host and virtual CPU devices (swap guard)
  kKvMem,         // --kv-mem on a device
  kKvFraction,    // --kv-fraction on a device or on host RAM
};
// "max_seq_len_x_max_num_seqs", "kv_tokens", "device_memory", "host_memory",
// "kv_mem", "kv_fraction".
const char* binding_limit_name(BindingLimit b);

struct DevicePlan {
  Device device;
  int32_t first_layer = -1;  // inclusive; -1/-1 when the device holds no layer
  int32_t last_layer = -1;
  bool holds_output = false;  // output norm + projection (with the last layer)
  uint64_t weight_bytes = 0;
  uint64_t kv_bytes = 0;
  // The recurrent state of its recurrent layers: max_num_seqs slots each.
  uint64_t state_bytes = 0;
  uint64_t workspace_bytes = 0;
  uint64_t headroom_bytes = 0;
  // The host only: the prefix cache's host tier (PlanRequest::host_tier_bytes).
  uint64_t host_tier_bytes = 0;
  // The host only: the disk tier's read-ahead staging (PlanRequest::disk_staging_bytes).
  uint64_t disk_staging_bytes = 0;
  uint64_t free_bytes = 0;
  // free - use; for the host, free - the use of the host and all virtual CPU
  // devices (they share its RAM).
  uint64_t free_after_bytes = 0;
  // Of weight_bytes, the expert stacks (MoE) held here: its own layers'
  // experts, and on the host those of other devices' layers placed there.
  uint64_t expert_bytes = 0;
  // Weight bytes one decoded token reads here: every matrix but the token
  // embedding (read by rows), of expert stacks the routed share.
  uint64_t read_bytes_per_token = 0;
  // The pipeline node (MPI rank) the device belongs to (0 on one machine).
  int32_t node = 0;

  std::string name() const { return device.name(); }
  bool has_layers() const { return first_layer >= 0; }
  int32_t n_layers() const { return has_layers() ? last_layer - first_layer + 1 : 0; }
  uint64_t used_bytes() const {
    return weight_bytes + kv_bytes + state_bytes + workspace_bytes + host_tier_bytes +
           disk_staging_bytes;
  }
};

struct Plan {
  std::vector<DevicePlan> devices;  // in pipeline order, the host last (per node)
  int32_t nodes = 1;                // pipeline nodes (MPI ranks), in rank order
  int32_t n_layer = 0;
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  int64_t kv_tokens = 0;  // num_blocks * block_size
  int64_t max_seq_len = 0;
  int32_t max_num_seqs = 0;
  int64_t max_concurrent_full_sequences = 0;  // num_blocks / ceil(max_seq_len / block_size)
  BindingLimit binding_limit = BindingLimit::kSeqCap;
  std::string binding_device;  // the device (or "host") whose limit binds; empty otherwise
  std::string binding_detail;  // one human sentence
  // Devices whose kernels lack some of the model's weight types (so layers
  // with them stay off those devices), e.g. "cuda:0 does not run q3_k, q5_0";
  // empty when every device runs every type.
  std::string kernel_note;
  KvMode kv_mode = KvMode::kAuto;
  bool manual_map = false;
  DType kv_type = DType::F16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  uint64_t kv_bytes_per_token = 0;  // all full-attention layers: what a token of context adds
  // MLA models: the cache holds one latent row per token and layer (that is
  // kv_bytes_per_token); what a GQA cache of the same heads would add per token.
  bool latent_kv = false;
  uint64_t gqa_kv_bytes_per_token = 0;
  // KV sharing (Gemma 4): layers that read an earlier layer's cache keep none
  // of their own (their source's is charged where the source runs). One
  // token's K + V over every layer's own cache (window layers' too), and what
  // it would take if the sharing layers kept theirs (set_kv_sharing).
  int32_t shared_kv_layers = 0;
  uint64_t all_layers_kv_bytes_per_token = 0;
  uint64_t unshared_kv_bytes_per_token = 0;
  // Recurrent layers (gated delta-net): they keep no K/V but a fixed state per
  // sequence, state_bytes_per_seq over all of them; the engine keeps
  // max_num_seqs slots (KvRuntimeConfig::state_slots), each device its own
  // layers' (DevicePlan::state_bytes).
  int32_t recurrent_layers = 0;
  uint64_t state_bytes_per_seq = 0;
  // State slots beside the sequences' for prefix-cache checkpoints, and their interval.
  int32_t state_checkpoints = 0;
  int32_t checkpoint_interval = 0;
  // KV groups (kvcache/kv_group.h): group 0 the full-attention layers, then
  // one per sliding window; a window group's blocks are the most its layers
  // hold (min(its need, num_blocks)), and every pool of the group is built
  // with that count (plan_kv_groups). One entry when the model has no windows.
  struct KvGroupPlan {
    int32_t window = 0;
    int32_t layers = 0;         // layers with a cache of their own in the group
    int32_t shared_layers = 0;  // layers of the window that read one of those caches
    uint64_t token_bytes = 0;   // K + V of one token over the group's own caches
    int64_t tokens = 0;  // blocks * block_size
    int32_t blocks = 0;
  };
  std::vector<KvGroupPlan> kv_groups;
  // Mixture of experts: per layer, whether its experts run on the host while
  // the rest of the layer runs on its device (empty: every layer's experts
  // with the layer; ModelLoadOptions::experts_on_host).
  std::vector<bool> experts_on_host;
  int32_t expert_layers_on_host() const;

  int32_t host_layers() const;
  // KV cache bytes over every device.
  uint64_t kv_bytes() const;
  // Recurrent state bytes over every device.
  uint64_t state_bytes() const;
  // The device that runs `layer`.
  const DevicePlan& device_of_layer(int32_t layer) const;
  // For KvCacheStorage: the devices' layer ranges in layer order (a manual
  // map may list devices in another order).
  std::vector<KvPoolPlacement> kv_placements() const;
  // The same for the devices of one pipeline node (MPI rank): its stage.
  std::vector<KvPoolPlacement> node_placements(int32_t node) const;
  // Group g's block count (kv_groups[g].blocks; num_blocks when not planned).
  std::vector<int32_t> kv_group_blocks() const;
  // The placement as a --device-map string ("0-11:cpu:0,12-23:host").
  std::string device_map() const;
};

// A plan that does not fit: the message says why and what would fit.
class PlanError : public Error {
 public:
  PlanError(const std::string& msg, int64_t largest_kv_tokens)
      : Error(msg), largest_kv_tokens_(largest_kv_tokens) {}
  // Tokens of cache of the largest plan that fits under the same flags; -1
  // when not even the weights fit.
  int64_t largest_kv_tokens() const { return largest_kv_tokens_; }

 private:
  int64_t largest_kv_tokens_;
};

// Plans. `devices` must end with the host (as measure_devices returns them).
// Throws PlanError when nothing fits as asked (before anything is allocated),
// ConfigError for an invalid request or device map.
Plan make_plan(const PlanRequest& req, const ModelFootprint& fp,
               const std::vector<PlanDevice>& devices);

// Blocks of each KV group (kvcache/kv_group.h order) when the full-attention
// group has `full_blocks`: a window group the blocks its window needs under
// the scheduler's limits (window_group_blocks), at most full_blocks. The one
// rule that sizes window groups: the cost model charges these, the plan
// carries them, and every KV runtime is built from them.
std::vector<int32_t> kv_group_blocks(const KvGroups& groups, int32_t block_size,
                                     int32_t max_num_seqs, int32_t max_batched_tokens,
                                     int32_t full_blocks);
// The footprint's KV groups at `blocks`, as a plan carries them.
std::vector<Plan::KvGroupPlan> plan_kv_groups(const ModelFootprint& fp, int32_t block_size,
                                              int32_t max_num_seqs, int64_t blocks);

// Sets the plan's KV-sharing fields (shared_kv_layers, all_layers_ and
// unshared_kv_bytes_per_token) from the footprint.
void set_kv_sharing(Plan& p, const ModelFootprint& fp);

// The largest block count a given placement holds under the request's KV mode
// (not capped at max_seq_len x max_num_seqs), or -1 when its weights and
// workspace alone do not fit or it puts a layer that reads another's KV cache
// on a GPU without that layer. `ranges[i]` is the layer range of devices[i]
// (the host last). For tests and for checking a manual map.
int64_t max_blocks_for_placement(const PlanRequest& req, const ModelFootprint& fp,
                                 const std::vector<PlanDevice>& devices,
                                 const std::vector<LayerRange>& ranges);

}  // namespace pagellm
