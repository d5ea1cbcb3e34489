// One KV block's bytes over every layer of group 0 (the prefix cache's
// group), as the tiers beyond the pool keep them (kvcache/disk_tier.h,
// kvcache/host_tier.h): each layer's K slots, then its V slots (a latent
// cache: K rows only), layers in pool order. A pool in a device's memory is
// read and written through its backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvcache/kv_cache_storage.h"

namespace pagellm {

// Calls fn(pool, layer, base, bytes) for each part of a block in group 0's
// pools: base the part's first block, bytes one block's part.
template <class Fn>
void for_each_block_part(const KvCacheStorage& storage, Fn&& fn) {
  for (const auto& p : storage.pools()) {
    const KvPoolShape& s = p->shape();
    if (s.group != 0) continue;
    const size_t bytes = static_cast<size_t>(s.block_size) * s.slot_bytes();
    for (int32_t l = s.layer_begin; l < s.layer_end; ++l) {
      if (!p->has_layer(l)) continue;
      auto* k = static_cast<uint8_t*>(p->k(l));
      auto* v = static_cast<uint8_t*>(p->v(l));
      fn(*p, l, k, bytes);
      if (v != k) fn(*p, l, v, bytes);  // a latent cache keeps K rows only
    }
  }
}

// The bytes of one block over every part.
size_t storage_block_bytes(const KvCacheStorage& storage);
// Block `block`'s bytes into out[0, storage_block_bytes) and back.
void copy_block_out(const KvCacheStorage& storage, int32_t block, uint8_t* out);
void copy_block_in(const KvCacheStorage& storage, int32_t block, const uint8_t* in);
// The backend of the first group-0 pool that is not in host memory (a GPU's,
// or the staged stand-in's); null when every pool is in host memory.
Backend* device_pool_backend(const KvCacheStorage& storage);

}  // namespace pagellm
