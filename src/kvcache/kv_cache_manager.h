// Per-sequence KV block bookkeeping over one BlockAllocator: prefix-cache
// matching for new prompts, all-or-nothing growth with copy-on-write of
// shared blocks, hashing of blocks as they fill, fork and free.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"

namespace pagellm {

// Copy block `src`'s slots into block `dst` in every layer's pool before the
// step that writes into `dst`.
struct BlockCopy {
  int32_t src;
  int32_t dst;
};

class KvCacheManager {
 public:
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool prefix_caching);

  int32_t block_size() const { return block_size_; }
  int64_t capacity_tokens() const {
    return static_cast<int64_t>(alloc_.num_blocks()) * block_size_;
  }
  bool prefix_caching() const { return prefix_caching_; }
  BlockAllocator& allocator() { return alloc_; }
  const BlockAllocator& allocator() const { return alloc_; }

  // For a sequence with no blocks yet: takes the cached full blocks that
  // match the start of `tokens`, leaving at least one token to compute.
  // Returns the number of tokens they cover (a multiple of the block size).
  int64_t match_prefix(std::span<const int32_t> tokens, BlockTable& table);

  // Makes room to write positions [write_from, n_tokens): new blocks as
  // needed, and private copies of shared blocks in that range (copy-on-write,
  // recorded in `copies`). All or nothing: false (and no change) if the free
  // blocks do not suffice.
  bool reserve(BlockTable& table, int64_t write_from, int64_t n_tokens,
               std::vector<BlockCopy>& copies);

  // Records that `tokens[0, n_computed)` are in the cache: hashes the blocks
  // that became full so later prompts can reuse them.
  void commit(std::span<const int32_t> tokens, BlockTable& table, int64_t n_computed);

  // `child` shares every block of `parent` (ref counts +1).
  void fork(const BlockTable& parent, BlockTable& child);
  void free(BlockTable& table);

 private:
  int32_t block_size_;
  bool prefix_caching_;
  BlockAllocator alloc_;
};

}  // namespace pagellm
