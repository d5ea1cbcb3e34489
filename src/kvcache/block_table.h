// One sequence's block table: the ids of the blocks holding its tokens in
// position order. Token at position p lives in slot
// table[p / block_size] * block_size + p % block_size of every layer's pool.
// Alongside, the chained prefix hashes of its leading full, computed blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcache/block_allocator.h"

namespace pagellm {

class BlockTable {
 public:
  explicit BlockTable(int32_t block_size) : block_size_(block_size) {}
  BlockTable(BlockTable&&) = default;
  BlockTable& operator=(BlockTable&&) = default;

  int32_t block_size() const { return block_size_; }
  const std::vector<int32_t>& blocks() const { return blocks_; }
  int64_t capacity_tokens() const { return static_cast<int64_t>(blocks_.size()) * block_size_; }

  // Blocks to add so that `n_tokens` fit.
  int32_t blocks_needed(int64_t n_tokens) const;
  // Grows the table to hold `n_tokens` (all-or-nothing); false if the
  // allocator has too few free blocks.
  bool reserve(BlockAllocator& alloc, int64_t n_tokens);
  // Cache slot of the token at `pos` (pos < capacity_tokens()).
  int64_t slot(int64_t pos) const {
    return static_cast<int64_t>(blocks_[static_cast<size_t>(pos / block_size_)]) * block_size_ +
           pos % block_size_;
  }
  // Returns every block to the allocator.
  void release(BlockAllocator& alloc);

  // For the cache manager.
  void reserve_capacity(size_t n_blocks) { blocks_.reserve(n_blocks); }
  void append_block(int32_t id) { blocks_.push_back(id); }
  void replace_block(size_t index, int32_t id) { blocks_[index] = id; }
  std::vector<uint64_t>& hashes() { return hashes_; }
  const std::vector<uint64_t>& hashes() const { return hashes_; }

 private:
  int32_t block_size_;
  std::vector<int32_t> blocks_;
  std::vector<uint64_t> hashes_;  // hashes_[i]: chained hash of full block i (i < hashes_.size())
};

}  // namespace pagellm
