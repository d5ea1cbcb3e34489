// KV blocks as metadata. A block id `b` names the same slot range
// [b * block_size, (b + 1) * block_size) in every layer's pool, on whatever
// device that layer lives; this allocator hands out ids and counts references.
// Allocation is all-or-nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace pagellm {

struct KvBlock {
  int32_t id = 0;
  int32_t ref_count = 0;
  uint64_t hash = 0;  // content hash of a full block (prefix caching); valid if has_hash
  bool has_hash = false;
};

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }

  // Takes `n` free blocks (ref count 1) and appends their ids to `out`; or, if
  // fewer than `n` are free, takes none and returns false.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  // Adds a reference to a block in use (sharing).
  void retain(int32_t id);
  // Drops a reference; the block is free again when none remain.
  void release(int32_t id);

  const KvBlock& block(int32_t id) const { return blocks_.at(static_cast<size_t>(id)); }
  void set_hash(int32_t id, uint64_t hash);

 private:
  std::vector<KvBlock> blocks_;
  std::vector<int32_t> free_;  // LIFO: recently freed blocks are reused first
};

}  // namespace pagellm
