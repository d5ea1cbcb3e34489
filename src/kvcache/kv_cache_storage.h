// The KV cache's storage across devices: one KvPool per device and KV group
// (kv_group.h), each holding that group's layers placed on that device; the
// pools of a group share one block numbering (block b is the same slot range
// in each). Block copies (copy-on-write) apply to every pool of their group.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvcache/kv_group.h"
#include "kvcache/kv_pool.h"
#include "kvcache/state_pool.h"

namespace pagellm {

// Gated delta-net layers keep a recurrent state per sequence instead of K/V:
// which layers, how many slots (sequences at once), floats per slot and layer.
struct RecurrentStateSpec {
  int32_t n_slots = 0;
  std::vector<bool> recurrent;  // per layer
  int64_t conv_floats = 0;
  int64_t delta_floats = 0;
  bool any() const {
    for (bool r : recurrent)
      if (r) return true;
    return false;
  }
};

// A device's KV pools: what they hold in memory now (an elastic pool's
// populated chunks) and their planned size.
struct KvDeviceBytes {
  std::string device;
  size_t resident = 0;
  size_t planned = 0;
  // Its pools are in memory of their own (a GPU, a staged device), not in
  // host RAM (the host, a virtual CPU device).
  bool own_memory = false;
};

struct KvPoolPlacement {
  std::string device;  // for messages and stats ("host", "cpu:0", ...)
  int32_t layer_begin = 0;
  int32_t layer_end = 0;  // exclusive
};

class KvCacheStorage {
 public:
  // The backend whose memory holds a device's pool; null: host RAM.
  using BackendOf = std::function<Backend*(const std::string& device)>;
  // `base` gives block count, block size, heads and dtype; each placement
  // gets a pool for its layers. Placements must tile [0, n_layer) in order.
  // With `groups` (more than one), group g's pools have group_blocks[g]
  // blocks (group_blocks[0] == base.num_blocks). `elastic`: group 0's host
  // pools are elastic (KvPool), populated by chunks (kvcache/elastic_pool.h).
  KvCacheStorage(const KvPoolShape& base, const std::vector<KvPoolPlacement>& placements,
                 const BackendOf& backend_of = {}, const KvGroups* groups = nullptr,
                 const std::vector<int32_t>& group_blocks = {},
                 const RecurrentStateSpec& states = {}, bool elastic = false);

  KvPool& pool_for_layer(int32_t layer);
  // Recurrent layers: their device's state pool (the layer has no KV pool).
  StatePool& state_pool_for_layer(int32_t layer);
  const std::vector<std::unique_ptr<StatePool>>& state_pools() const { return state_pools_; }
  // Slot operations on every device's pool (a sequence's state spans them).
  void clear_state_slot(int32_t slot);
  void copy_state_slot(int32_t src, int32_t dst);
  const std::vector<std::unique_ptr<KvPool>>& pools() const { return pools_; }
  const std::vector<KvPoolPlacement>& placements() const { return placements_; }
  void copy_block(int32_t src, int32_t dst, int32_t group = 0);
  size_t total_bytes() const;
  // Per placement's device, in placement order (KV pools only).
  std::vector<KvDeviceBytes> pool_bytes_by_device() const;
  // The memory `pool`'s bytes come out of: "host" for host RAM, else its
  // device's name (KvDeviceBytes::own_memory).
  std::string memory_of(const KvPool& pool) const;

 private:
  std::vector<KvPoolPlacement> placements_;
  std::vector<std::unique_ptr<KvPool>> pools_;
  std::vector<int32_t> pool_of_layer_;
  std::vector<std::unique_ptr<StatePool>> state_pools_;
  std::vector<int32_t> state_pool_of_layer_;
};

}  // namespace pagellm
