#include "kvcache/kv_pool.h"

#include <fmt/format.h>

#include <algorithm>

#include <cstring>

#include "util/host_pages.h"
#include "util/error.h"

namespace pagellm {

size_t KvPoolShape::slot_bytes() const {
  return static_cast<size_t>(n_kv_heads) * dtype_row_bytes(dtype, head_dim);
}
size_t KvPoolShape::layer_bytes() const {
  return (v_dim > 0 ? 1 : 2) * static_cast<size_t>(num_blocks) * block_size * slot_bytes();
}
size_t KvPoolShape::total_bytes() const {
  return static_cast<size_t>(n_layers()) * layer_bytes();
}
int32_t KvPoolShape::n_layers() const {
  return layers.empty() ? layer_end - layer_begin : static_cast<int32_t>(layers.size());
}
int32_t KvPoolShape::layer_index(int32_t layer) const {
  if (layer < layer_begin || layer >= layer_end) return -1;
  if (layers.empty()) return layer - layer_begin;
  auto it = std::lower_bound(layers.begin(), layers.end(), layer);
  return it != layers.end() && *it == layer ? static_cast<int32_t>(it - layers.begin()) : -1;
}

KvPool::KvPool(const KvPoolShape& shape, Backend* backend, bool elastic)
    : shape_(shape), backend_(backend), elastic_(elastic) {
  if (shape.dtype != DType::F16 && shape.dtype != DType::F32 && shape.dtype != DType::Q8_0)
    throw ConfigError(fmt::format("unsupported KV cache type '{}' (supported: f16, f32, q8_0)",
                                  dtype_name(shape.dtype)));
  if (shape.dtype == DType::Q8_0 && shape.head_dim % 32 != 0)
    throw ConfigError(
        fmt::format("a q8_0 KV cache needs a head size that is a multiple of 32 "
                    "(this model's is {})",
                    shape.head_dim));
  if (shape.v_dim < 0 || shape.v_dim > shape.head_dim ||
      (shape.v_dim > 0 && (shape.n_kv_heads != 1 || shape.v_dim % dtype_block_size(shape.dtype) != 0)))
    throw ConfigError(fmt::format("invalid latent KV pool: values of {} from rows of {} ({} heads, {})",
                                  shape.v_dim, shape.head_dim, shape.n_kv_heads,
                                  dtype_name(shape.dtype)));
  if (shape.block_size <= 0 || shape.num_blocks < 0 || shape.n_kv_heads <= 0 ||
      shape.head_dim <= 0 || shape.layer_end < shape.layer_begin)
    throw ConfigError(fmt::format("invalid KV pool shape: {} blocks of {} tokens, {} heads of {}",
                                  shape.num_blocks, shape.block_size, shape.n_kv_heads,
                                  shape.head_dim));
  bytes_ = shape.total_bytes();
  if (bytes_ == 0) return;
  // Host RAM comes from the CPU backend's allocation: zeroed pages, populated
  // now so that the cache the plan reserved is really resident (a cache that
  // faults in later could meet a machine that has run out of memory).
  // An elastic pool populates its blocks as the allocator takes them.
  // A backend without elastic ranges (reserve_range null) keeps its pool whole.
  try {
    if (elastic_) {
      data_ = static_cast<uint8_t*>(backend_ ? backend_->reserve_range(bytes_)
                                             : reserve_host_pages(bytes_));
      elastic_ = data_ != nullptr;
    }
    if (!data_)
      data_ = static_cast<uint8_t*>(backend_ ? backend_->allocate(bytes_)
                                             : allocate_host_pages(bytes_));
  } catch (const SystemError& e) {
    throw SystemError(fmt::format("KV cache: {}", e.what()));
  }
}

KvPool::~KvPool() {
  if (!data_) return;
  if (!backend_) {
    free_host_pages(data_, bytes_);
  } else if (elastic_) {
    // Its blocks are populated from 0 up (ElasticPool's chunks): those go
    // back first, so that the backend's account of what it holds is right.
    release_blocks(0, static_cast<int32_t>(populated_blocks_));
    backend_->release_range(data_, bytes_);
  } else {
    backend_->deallocate(data_, bytes_);
  }
}


uint8_t* KvPool::layer_base(int32_t layer) const {
  if (!has_layer(layer))
    throw Error(fmt::format("layer {} is not in this KV pool [{}, {})", layer, shape_.layer_begin,
                            shape_.layer_end));
  return data_ + static_cast<size_t>(shape_.layer_index(layer)) * shape_.layer_bytes();
}

void* KvPool::k(int32_t layer) {
  return layer_base(layer);
}
void* KvPool::v(int32_t layer) {
  return shape_.v_dim > 0 ? layer_base(layer) : layer_base(layer) + shape_.layer_bytes() / 2;
}
const void* KvPool::k(int32_t layer) const {
  return layer_base(layer);
}
const void* KvPool::v(int32_t layer) const {
  return shape_.v_dim > 0 ? layer_base(layer) : layer_base(layer) + shape_.layer_bytes() / 2;
}

KvLayerView KvPool::view(int32_t layer) {
  KvLayerView view{k(layer), v(layer), shape_.dtype, shape_.block_size, shape_.n_kv_heads,
                   shape_.head_dim};
  view.group = shape_.group;
  view.v_dim = shape_.v_dim;
  return view;
}

void KvPool::copy(void* dst, const void* src, size_t bytes) const {
  if (backend_)
    backend_->copy(dst, src, bytes);
  else
    std::memmove(dst, src, bytes);
}

void KvPool::copy_block(int32_t src, int32_t dst) {
  const size_t block_bytes = static_cast<size_t>(shape_.block_size) * shape_.slot_bytes();
  const int parts = shape_.v_dim > 0 ? 1 : 2;  // a latent cache has K rows only
  for (int32_t l = shape_.layer_begin; l < shape_.layer_end; ++l)
    if (has_layer(l))
      for (int i = 0; i < parts; ++i) {
        auto* base = static_cast<uint8_t*>(i == 0 ? k(l) : v(l));
        copy(base + static_cast<size_t>(dst) * block_bytes,
             base + static_cast<size_t>(src) * block_bytes, block_bytes);
      }
}

template <typename Fn>
void KvPool::for_block_ranges(int32_t first, int32_t count, Fn fn) const {
  const size_t block_bytes = static_cast<size_t>(shape_.block_size) * shape_.slot_bytes();
  const int parts = shape_.v_dim > 0 ? 1 : 2;
  for (int32_t l = shape_.layer_begin; l < shape_.layer_end; ++l)
    if (has_layer(l))
      for (int i = 0; i < parts; ++i) {
        uint8_t* base = layer_base(l) + (i == 0 ? 0 : shape_.layer_bytes() / 2);
        fn(base + static_cast<size_t>(first) * block_bytes,
           static_cast<size_t>(count) * block_bytes);
      }
}

bool KvPool::populate_blocks(int32_t first, int32_t count) {
  if (!elastic_ || !data_ || count <= 0) return true;
  bool ok = true;
  int committed = 0;  // ranges populated before a failure
  for_block_ranges(first, count, [&](uint8_t* p, size_t n) {
    if (ok) ok = commit(p, n);
    if (ok) ++committed;
  });
  if (!ok) {  // none of it stays: the blocks remain unpopulated
    for_block_ranges(first, count, [&](uint8_t* p, size_t n) {
      if (committed-- > 0) decommit(p, n);
    });
    return false;
  }
  populated_blocks_ += count;
  return true;
}

void KvPool::release_blocks(int32_t first, int32_t count) {
  if (!elastic_ || !data_ || count <= 0) return;
  for_block_ranges(first, count, [this](uint8_t* p, size_t n) { decommit(p, n); });
  populated_blocks_ -= count;
}

bool KvPool::commit(void* p, size_t bytes) {
  return backend_ ? backend_->commit_range(p, bytes) : populate_host_range(p, bytes);
}

void KvPool::decommit(void* p, size_t bytes) {
  if (backend_)
    backend_->decommit_range(p, bytes);
  else
    release_host_range(p, bytes);
}

size_t KvPool::elastic_granularity() const {
  return backend_ ? backend_->elastic_granularity() : 4096;
}

size_t KvPool::block_bytes_all_layers() const {
  return static_cast<size_t>(shape_.n_layers()) * (shape_.v_dim > 0 ? 1 : 2) *
         static_cast<size_t>(shape_.block_size) * shape_.slot_bytes();
}

size_t KvPool::resident_bytes() const {
  return elastic_ ? static_cast<size_t>(populated_blocks_) * block_bytes_all_layers() : bytes_;
}

}  // namespace pagellm
