// One sequence's block table: the ids of the blocks holding its tokens in
// position order. Token at position p lives in slot
// table[p / block_size] * block_size + p % block_size of every layer's pool.
// Alongside, the chained prefix hashes of its leading full, computed blocks.
// With KV groups (kv_group.h) it keeps one list per group: blocks() is group
// 0's; a window group's list has kNoBlock where blocks left the window.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcache/block_allocator.h"

namespace pagellm {

class BlockTable {
 public:
  static constexpr int32_t kNoBlock = -1;

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

  // KV groups: group 0 is blocks(); the others exist once the cache manager
  // sets them up (set_groups).
  int32_t n_groups() const { return 1 + static_cast<int32_t>(more_.size()); }
  const std::vector<int32_t>& blocks(int32_t group) const {
    return group == 0 ? blocks_ : more_[static_cast<size_t>(group - 1)];
  }
  int64_t slot(int32_t group, int64_t pos) const {
    const auto& b = blocks(group);
    return static_cast<int64_t>(b[static_cast<size_t>(pos / block_size_)]) * block_size_ +
           pos % block_size_;
  }

  // For the cache manager.
  void set_groups(int32_t n) { more_.resize(static_cast<size_t>(n - 1)); }
  std::vector<int32_t>& group_blocks(int32_t group) {
    return group == 0 ? blocks_ : more_[static_cast<size_t>(group - 1)];
  }
  void reserve_capacity(size_t n_blocks) { blocks_.reserve(n_blocks); }
  void append_block(int32_t id) { blocks_.push_back(id); }
  void replace_block(size_t index, int32_t id) { blocks_[index] = id; }
  std::vector<uint64_t>& hashes() { return hashes_; }
  const std::vector<uint64_t>& hashes() const { return hashes_; }

 private:
  int32_t block_size_;
  std::vector<int32_t> blocks_;
  std::vector<uint64_t> hashes_;  // hashes_[i]: chained hash of full block i (i < hashes_.size())
  std::vector<std::vector<int32_t>> more_;  // groups 1..: window groups' blocks
};

}  // namespace pagellm
