#include "kvcache/kv_cache_storage.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"

namespace pagellm {

KvCacheStorage::KvCacheStorage(const KvPoolShape& base,
                               const std::vector<KvPoolPlacement>& placements,
                               const BackendOf& backend_of, const KvGroups* groups,
                               const std::vector<int32_t>& group_blocks,
                               const RecurrentStateSpec& states, bool elastic)
    : placements_(placements) {
  auto recurrent = [&states](int32_t l) {
    return static_cast<size_t>(l) < states.recurrent.size() && states.recurrent[static_cast<size_t>(l)];
  };
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
  const bool shaped = !base.per_layer.empty();
  if (shaped && static_cast<int32_t>(base.per_layer.size()) < base.layer_end)
    throw ConfigError("KV pool: one shape per layer needed");
  auto shape_of = [&](int32_t l) {
    return shaped ? base.per_layer[static_cast<size_t>(l)] : KvLayerShape{base.n_kv_heads, base.head_dim};
  };
  for (const auto& p : placements) {
    if (p.layer_end == p.layer_begin) continue;
    for (int32_t g = 0; g < n_groups; ++g) {
      // The group's layers here, one pool per distinct KV shape (in order of
      // first appearance); layers that keep no KV get none.
      std::vector<KvLayerShape> shapes = {shape_of(p.layer_begin)};
      for (size_t i = 0; i < shapes.size(); ++i) {
        KvPoolShape s = base;
        s.per_layer.clear();
        s.layer_begin = p.layer_begin;
        s.layer_end = p.layer_end;
        s.n_kv_heads = shapes[i].n_kv_heads;
        s.head_dim = shapes[i].head_dim;
        if ((groups && n_groups > 1) || states.any() || shaped) {
          s.group = g;
          if (groups && n_groups > 1) s.num_blocks = group_blocks[static_cast<size_t>(g)];
          for (int32_t l = p.layer_begin; l < p.layer_end; ++l) {
            if ((groups && groups->group_of_layer[static_cast<size_t>(l)] != g) || recurrent(l) ||
                shape_of(l).n_kv_heads == 0)
              continue;
            if (shape_of(l) == shapes[i])
              s.layers.push_back(l);
            else if (std::find(shapes.begin(), shapes.end(), shape_of(l)) == shapes.end())
              shapes.push_back(shape_of(l));
          }
          if (s.layers.empty()) continue;
        }
        pools_.push_back(std::make_unique<KvPool>(s, backend_of ? backend_of(p.device) : nullptr,
                                                  elastic && g == 0));
        for (int32_t l = p.layer_begin; l < p.layer_end; ++l)
          if (pools_.back()->has_layer(l))
            pool_of_layer_[static_cast<size_t>(l)] = static_cast<int32_t>(pools_.size() - 1);
      }
    }
  }
  state_pool_of_layer_.assign(static_cast<size_t>(base.layer_end), -1);
  if (!states.any()) return;
  for (const auto& p : placements) {
    StatePoolShape shape;
    shape.n_slots = states.n_slots;
    shape.conv_floats = states.conv_floats;
    shape.delta_floats = states.delta_floats;
    for (int32_t l = p.layer_begin; l < p.layer_end; ++l)
      if (recurrent(l)) shape.layers.push_back(l);
    if (shape.layers.empty()) continue;
    state_pools_.push_back(
        std::make_unique<StatePool>(std::move(shape), backend_of ? backend_of(p.device) : nullptr));
    for (int32_t l : state_pools_.back()->shape().layers)
      state_pool_of_layer_[static_cast<size_t>(l)] = static_cast<int32_t>(state_pools_.size() - 1);
  }
}

StatePool& KvCacheStorage::state_pool_for_layer(int32_t layer) {
  const int32_t i = static_cast<size_t>(layer) < state_pool_of_layer_.size()
                        ? state_pool_of_layer_[static_cast<size_t>(layer)]
                        : -1;
  if (i < 0) throw Error(fmt::format("layer {} has no recurrent state pool", layer));
  return *state_pools_[static_cast<size_t>(i)];
}

void KvCacheStorage::clear_state_slot(int32_t slot) {
  for (auto& p : state_pools_) p->clear_slot(slot);
}

void KvCacheStorage::copy_state_slot(int32_t src, int32_t dst) {
  for (auto& p : state_pools_) p->copy_slot(src, dst);
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
  for (const auto& p : state_pools_) n += p->bytes();
  return n;
}

namespace {

bool own_memory(const KvPool& p) {
  return p.backend() && !p.backend()->uses_host_memory();
}

bool placed_at(const KvPool& p, const KvPoolPlacement& pl) {
  return p.shape().layer_begin == pl.layer_begin && p.shape().layer_end == pl.layer_end &&
         pl.layer_end > pl.layer_begin;
}

}  // namespace

std::vector<KvDeviceBytes> KvCacheStorage::pool_bytes_by_device() const {
  std::vector<KvDeviceBytes> out;
  for (const auto& pl : placements_) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const KvDeviceBytes& d) { return d.device == pl.device; });
    if (it == out.end()) it = out.insert(out.end(), KvDeviceBytes{pl.device});
    for (const auto& p : pools_)
      if (placed_at(*p, pl)) {
        it->resident += p->resident_bytes();
        it->planned += p->shape().total_bytes();
        it->own_memory = own_memory(*p);
      }
  }
  return out;
}

std::string KvCacheStorage::memory_of(const KvPool& pool) const {
  if (own_memory(pool))
    for (const auto& pl : placements_)
      if (placed_at(pool, pl)) return pl.device;
  return "host";
}

}  // namespace pagellm
