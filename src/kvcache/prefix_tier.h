// A second home for the prefix cache's full blocks beyond the KV pool (the
// disk tier, kvcache/disk_tier.h). KvCacheManager tells it each block that
// commit() hashes and, when a prompt's in-memory match ends, asks it for the
// prompt's next blocks. Blocks are named by their id in group 0 and their
// parent's id: the tier keeps each committed block's chained key.
// Called on the engine thread only; never throws.
#pragma once

#include <cstdint>
#include <span>

namespace pagellm {

class PrefixTier {
 public:
  virtual ~PrefixTier() = default;
  // Block `block` now holds the full block `tokens`, which follows block
  // `parent` (-1: the sequence's first block) in a sequence.
  virtual void committed(int32_t block, int32_t parent, std::span<const int32_t> tokens) = 0;
  // Looks up the full block `tokens` after block `parent` (-1: first); true:
  // its K/V is read and checked, ready for place().
  virtual bool fetch(int32_t parent, std::span<const int32_t> tokens) = 0;
  // Writes what fetch() found into block `block` of every layer.
  virtual void place(int32_t block) = 0;
};

}  // namespace pagellm
