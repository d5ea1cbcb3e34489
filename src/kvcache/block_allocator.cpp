#include "kvcache/block_allocator.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"

namespace pagellm {

BlockAllocator::BlockAllocator(int32_t num_blocks) {
  if (num_blocks < 0) throw ConfigError(fmt::format("invalid KV block count {}", num_blocks));
  const auto n = static_cast<size_t>(num_blocks);
  blocks_.resize(n);
  block_tokens_.resize(n);
  lru_pos_.resize(n);
  in_lru_.assign(n, false);
  free_.reserve(n);
  for (int32_t i = 0; i < num_blocks; ++i) {  // ascending: already a min-heap
    blocks_[static_cast<size_t>(i)].id = i;
    free_.push_back(i);
  }
}

void BlockAllocator::set_chunks(int32_t chunk_blocks, int32_t populated, GrowFn grow) {
  if (chunk_blocks <= 0 || populated < 1)
    throw ConfigError(
        fmt::format("invalid KV pool chunks: {} of {} blocks", populated, chunk_blocks));
  if (num_used() != 0 || !lru_.empty()) throw Error("KV pool chunks set while blocks are in use");
  chunk_blocks_ = chunk_blocks;
  chunks_ = std::min(populated, num_chunks());
  grow_ = std::move(grow);
  free_.clear();
  for (int32_t i = 0; i < available_blocks(); ++i) free_.push_back(i);
}

int32_t BlockAllocator::num_chunks() const {
  return chunk_blocks_ == 0 ? 1 : (num_blocks() + chunk_blocks_ - 1) / chunk_blocks_;
}

int32_t BlockAllocator::chunk_begin(int32_t c) const {
  return chunk_blocks_ == 0 ? 0 : std::min(num_blocks(), c * chunk_blocks_);
}

int32_t BlockAllocator::chunk_end(int32_t c) const {
  return chunk_blocks_ == 0 ? num_blocks() : std::min(num_blocks(), (c + 1) * chunk_blocks_);
}

int32_t BlockAllocator::available_blocks() const {
  return chunk_end(chunks_ - 1);
}

bool BlockAllocator::ensure_free(int32_t n) {
  while (static_cast<int32_t>(free_.size()) < n && grow_ && chunks_ < num_chunks() &&
         grow_(chunks_)) {
    for (int32_t id = chunk_begin(chunks_); id < chunk_end(chunks_); ++id) {
      free_.push_back(id);
      std::push_heap(free_.begin(), free_.end(), std::greater<>());
    }
    ++chunks_;
  }
  return n <= num_free();
}

bool BlockAllocator::remove_top_chunk(
    const std::function<void(int32_t id, std::span<const int32_t> tokens)>& dropped) {
  if (chunks_ <= 1) return false;
  const int32_t begin = chunk_begin(chunks_ - 1), end = chunk_end(chunks_ - 1);
  for (int32_t id = begin; id < end; ++id)
    if (blocks_[static_cast<size_t>(id)].ref_count > 0) return false;
  for (int32_t id = begin; id < end; ++id)
    if (in_lru_[static_cast<size_t>(id)]) {
      lru_.erase(lru_pos_[static_cast<size_t>(id)]);
      in_lru_[static_cast<size_t>(id)] = false;
      if (dropped) dropped(id, block_tokens_[static_cast<size_t>(id)]);
      drop_hash(id);
      ++evictions_;
    }
  std::erase_if(free_, [&](int32_t id) { return id >= begin; });
  std::make_heap(free_.begin(), free_.end(), std::greater<>());
  --chunks_;
  return true;
}

bool BlockAllocator::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n < 0 || !ensure_free(n)) return false;
  for (int32_t i = 0; i < n; ++i) {
    int32_t id;
    if (!free_.empty()) {
      std::pop_heap(free_.begin(), free_.end(), std::greater<>());
      id = free_.back();
      free_.pop_back();
    } else {
      id = lru_.front();
      lru_.pop_front();
      in_lru_[static_cast<size_t>(id)] = false;
      if (on_evict_) on_evict_(id, block_tokens_[static_cast<size_t>(id)]);
      drop_hash(id);
      ++evictions_;
    }
    KvBlock& b = blocks_[static_cast<size_t>(id)];
    b.ref_count = 1;
    out.push_back(id);
  }
  return true;
}

void BlockAllocator::next_evictions(int32_t n, std::vector<int32_t>& out) const {
  int64_t left = static_cast<int64_t>(n) - static_cast<int64_t>(free_.size());
  for (auto it = lru_.begin(); left > 0 && it != lru_.end(); ++it, --left) out.push_back(*it);
}

void BlockAllocator::retain(int32_t id) {
  KvBlock& b = blocks_.at(static_cast<size_t>(id));
  if (b.ref_count == 0) {
    if (!in_lru_[static_cast<size_t>(id)])
      throw Error(fmt::format("retain of free KV block {}", id));
    lru_.erase(lru_pos_[static_cast<size_t>(id)]);
    in_lru_[static_cast<size_t>(id)] = false;
  }
  ++b.ref_count;
}

void BlockAllocator::release(int32_t id) {
  KvBlock& b = blocks_.at(static_cast<size_t>(id));
  if (b.ref_count <= 0) throw Error(fmt::format("release of free KV block {}", id));
  if (--b.ref_count > 0) return;
  if (b.has_hash) {
    lru_pos_[static_cast<size_t>(id)] = lru_.insert(lru_.end(), id);
    in_lru_[static_cast<size_t>(id)] = true;
  } else {
    free_.push_back(id);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
  }
}

void BlockAllocator::drop_hash(int32_t id) {
  KvBlock& b = blocks_[static_cast<size_t>(id)];
  if (!b.has_hash) return;
  auto it = by_hash_.find(b.hash);
  if (it != by_hash_.end() && it->second == id) by_hash_.erase(it);
  b.has_hash = false;
  block_tokens_[static_cast<size_t>(id)].clear();
}

std::optional<int32_t> BlockAllocator::find(uint64_t hash, std::span<const int32_t> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const auto& stored = block_tokens_[static_cast<size_t>(it->second)];
  if (!std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end())) return std::nullopt;
  return it->second;
}

std::optional<int32_t> BlockAllocator::lookup(uint64_t hash, std::span<const int32_t> tokens) {
  auto id = find(hash, tokens);
  count_lookups(1, id ? 1 : 0);
  return id;
}

void BlockAllocator::set_hash(int32_t id, uint64_t hash, std::span<const int32_t> tokens) {
  KvBlock& b = blocks_.at(static_cast<size_t>(id));
  if (b.ref_count <= 0) throw Error(fmt::format("set_hash on free KV block {}", id));
  if (b.has_hash) return;
  // Another block already holds this content: keep that one; this one frees normally.
  if (!by_hash_.emplace(hash, id).second) return;
  b.hash = hash;
  b.has_hash = true;
  block_tokens_[static_cast<size_t>(id)].assign(tokens.begin(), tokens.end());
}

BlockAllocatorStats BlockAllocator::stats() const {
  BlockAllocatorStats s;
  s.total = num_blocks();
  s.populated = available_blocks();
  s.cached = num_cached();
  s.used = num_used();
  s.prefix_queries = queries_;
  s.prefix_hits = hits_;
  s.evictions = evictions_;
  return s;
}

uint64_t BlockAllocator::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  // 64-bit mix in the style of splitmix/FNV; collisions are caught by the
  // token comparison in lookup().
  uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
  for (int32_t t : tokens) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull + (h << 6) +
         (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return h;
}

}  // namespace pagellm
