// Storage for the K and V caches of a range of layers on one device.
//
// Layout, per layer, for K and for V separately:
//   [num_blocks * block_size slots][n_kv_heads][head_dim] elements of `dtype`
//   (F16, F32, or Q8_0: each head row is head_dim / 32 Q8_0 blocks)
// i.e. a slot is one token's K (or V) for all KV heads, contiguous; a block is
// block_size consecutive slots. Kernels address it through block tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "tensor/dtype.h"

namespace pagellm {

// One layer's K/V row shape (KvPoolShape::per_layer).
struct KvLayerShape {
  int32_t n_kv_heads = 0;  // 0: the layer keeps no KV (it shares another's)
  int32_t head_dim = 0;
  bool operator==(const KvLayerShape&) const = default;
};

struct KvPoolShape {
  int32_t layer_begin = 0;  // layers [layer_begin, layer_end) live in this pool
  int32_t layer_end = 0;
  // With KV groups: the pool's KV group, and its layers (a subset of
  // [layer_begin, layer_end), ascending); empty: every layer of the range.
  int32_t group = 0;
  std::vector<int32_t> layers;
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::F16;  // F16, F32 or Q8_0
  // KvCacheStorage's base shape only: per layer of the model, its KV heads
  // and head size where layers differ (Gemma 4) or share KV; empty:
  // n_kv_heads and head_dim for every layer. Each pool has one shape.
  std::vector<KvLayerShape> per_layer;
  // > 0: a latent cache (MLA): K rows only (one latent + RoPE row per token
  // and layer, n_kv_heads 1), values read from their first v_dim elements.
  int32_t v_dim = 0;

  size_t slot_bytes() const;   // one token, one layer, K or V
  size_t layer_bytes() const;  // K + V of one layer (a latent cache: K only)
  size_t total_bytes() const;
  int32_t n_layers() const;
  // Index of `layer` among the pool's layers; -1 when it is not one.
  int32_t layer_index(int32_t layer) const;
};

class KvPool {
 public:
  // Allocates and zeroes the storage, in `backend`'s memory (host RAM when
  // null). Throws ConfigError for an unsupported dtype or a bad shape,
  // SystemError (or the backend's error) when memory cannot be had.
  // `elastic`: the range is reserved but no block is populated until
  // populate_blocks() (kvcache/elastic_pool.h): host pages, or the backend's
  // elastic ranges (Backend::reserve_range; a backend without them keeps the
  // pool whole).
  explicit KvPool(const KvPoolShape& shape, Backend* backend = nullptr, bool elastic = false);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  const KvPoolShape& shape() const { return shape_; }
  Backend* backend() const { return backend_; }  // null: host RAM
  // Layer `layer`'s K and V as the kernels take them.
  KvLayerView view(int32_t layer);
  bool has_layer(int32_t layer) const { return shape_.layer_index(layer) >= 0; }
  void* k(int32_t layer);
  void* v(int32_t layer);
  const void* k(int32_t layer) const;
  const void* v(int32_t layer) const;

  // Copies block `src`'s K and V slots to block `dst` in every layer of the pool.
  void copy_block(int32_t src, int32_t dst);

  // Elastic pools: populate blocks [first, first + count) in every layer (K
  // and V), or return them to the OS (their contents are lost). No-ops for
  // other pools. populate_blocks is false when the memory cannot be had.
  bool elastic() const { return elastic_; }
  bool populate_blocks(int32_t first, int32_t count);
  void release_blocks(int32_t first, int32_t count);
  // Bytes of one block over every layer of the pool (K and V).
  size_t block_bytes_all_layers() const;
  // The unit its memory is populated in (a page, a GPU's mapping granule).
  size_t elastic_granularity() const;
  // What the pool holds in memory: an elastic pool's populated blocks, else all.
  size_t resident_bytes() const;

 private:
  uint8_t* layer_base(int32_t layer) const;
  // Calls fn(address, bytes) for blocks [first, first + count) of each layer's K and V.
  template <typename Fn>
  void for_block_ranges(int32_t first, int32_t count, Fn fn) const;
  void copy(void* dst, const void* src, size_t bytes) const;  // in the pool's memory
  bool commit(void* p, size_t bytes);  // an elastic range: host pages or the backend's
  void decommit(void* p, size_t bytes);

  KvPoolShape shape_;
  Backend* backend_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  bool elastic_ = false;
  int64_t populated_blocks_ = 0;  // elastic pools
};

}  // namespace pagellm
