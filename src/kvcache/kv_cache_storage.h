// The KV cache's storage across devices: one KvPool per device, each holding
// the layers placed on that device, all sharing one block numbering (block b
// is the same slot range in every pool). Block copies (copy-on-write) apply
// to every pool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvcache/kv_pool.h"

namespace pagellm {

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
  KvCacheStorage(const KvPoolShape& base, const std::vector<KvPoolPlacement>& placements,
                 const BackendOf& backend_of = {});

  KvPool& pool_for_layer(int32_t layer);
  const std::vector<std::unique_ptr<KvPool>>& pools() const { return pools_; }
  const std::vector<KvPoolPlacement>& placements() const { return placements_; }
  void copy_block(int32_t src, int32_t dst);
  size_t total_bytes() const;

 private:
  std::vector<KvPoolPlacement> placements_;
  std::vector<std::unique_ptr<KvPool>> pools_;
  std::vector<int32_t> pool_of_layer_;
};

}  // namespace pagellm
