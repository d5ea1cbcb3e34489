#include "kvcache/kv_cache_storage.h"

#include <fmt/format.h>

#include "util/error.h"

namespace pagellm {

KvCacheStorage::KvCacheStorage(const KvPoolShape& base,
                               const std::vector<KvPoolPlacement>& placements,
                               const BackendOf& backend_of, const KvGroups* groups,
                               const std::vector<int32_t>& group_blocks)
    : placements_(placements) {
  const int32_t n_groups = groups ? groups->n_groups() : 1;
  if (groups && (static_cast<int32_t>(group_blocks.size()) != n_groups ||
                 static_cast<int32_t>(groups->group_of_layer.size()) < base.layer_end))
    throw ConfigError("KV groups: one block count per group and one group per layer needed");
  int32_t next = base.layer_begin;
  for (const auto& p : placements) {
    if (p.layer_begin != next || p.layer_end < p.layer_begin)
      throw ConfigError(
          fmt::format("KV placement for '{}' covers layers [{}, {}), expected to start "
                      "at {}",
                      p.device, p.layer_begin, p.layer_end, next));
    next = p.layer_end;
  }
  if (next != base.layer_end)
    throw ConfigError(
        fmt::format("KV placements cover layers up to {}, the model has {}", next, base.layer_end));
  pool_of_layer_.assign(static_cast<size_t>(base.layer_end), -1);
  for (const auto& p : placements) {
    if (p.layer_end == p.layer_begin) continue;
    for (int32_t g = 0; g < n_groups; ++g) {
      KvPoolShape s = base;
      s.layer_begin = p.layer_begin;
      s.layer_end = p.layer_end;
      if (groups && n_groups > 1) {
        s.group = g;
        s.num_blocks = group_blocks[static_cast<size_t>(g)];
        for (int32_t l = p.layer_begin; l < p.layer_end; ++l)
          if (groups->group_of_layer[static_cast<size_t>(l)] == g) s.layers.push_back(l);
        if (s.layers.empty()) continue;
      }
      pools_.push_back(std::make_unique<KvPool>(s, backend_of ? backend_of(p.device) : nullptr));
      for (int32_t l = p.layer_begin; l < p.layer_end; ++l)
        if (pools_.back()->has_layer(l))
          pool_of_layer_[static_cast<size_t>(l)] = static_cast<int32_t>(pools_.size() - 1);
    }
  }
}

KvPool& KvCacheStorage::pool_for_layer(int32_t layer) {
  return *pools_.at(static_cast<size_t>(pool_of_layer_.at(static_cast<size_t>(layer))));
}

void KvCacheStorage::copy_block(int32_t src, int32_t dst, int32_t group) {
  for (auto& p : pools_)
    if (p->shape().group == group) p->copy_block(src, dst);
}

size_t KvCacheStorage::total_bytes() const {
  size_t n = 0;
  for (const auto& p : pools_) n += p->shape().total_bytes();
  return n;
}

}  // namespace pagellm
