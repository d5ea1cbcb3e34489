#include "kvcache/block_allocator.h"

#include <fmt/format.h>

#include "util/error.h"

namespace pagellm {

BlockAllocator::BlockAllocator(int32_t num_blocks) {
  if (num_blocks < 0) throw ConfigError(fmt::format("invalid KV block count {}", num_blocks));
  blocks_.resize(static_cast<size_t>(num_blocks));
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int32_t i = num_blocks - 1; i >= 0; --i) {
    blocks_[static_cast<size_t>(i)].id = i;
    free_.push_back(i);
  }
}

bool BlockAllocator::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n < 0 || n > num_free()) return false;
  for (int32_t i = 0; i < n; ++i) {
    int32_t id = free_.back();
    free_.pop_back();
    KvBlock& b = blocks_[static_cast<size_t>(id)];
    b.ref_count = 1;
    b.has_hash = false;
    out.push_back(id);
  }
  return true;
}

void BlockAllocator::retain(int32_t id) {
  KvBlock& b = blocks_.at(static_cast<size_t>(id));
  if (b.ref_count <= 0) throw Error(fmt::format("retain of free KV block {}", id));
  ++b.ref_count;
}

void BlockAllocator::release(int32_t id) {
  KvBlock& b = blocks_.at(static_cast<size_t>(id));
  if (b.ref_count <= 0) throw Error(fmt::format("release of free KV block {}", id));
  if (--b.ref_count == 0) {
    b.has_hash = false;
    free_.push_back(id);
  }
}

void BlockAllocator::set_hash(int32_t id, uint64_t hash) {
  KvBlock& b = blocks_.at(static_cast<size_t>(id));
  b.hash = hash;
  b.has_hash = true;
}

}  // namespace pagellm
