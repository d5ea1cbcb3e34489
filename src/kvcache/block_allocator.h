// KV blocks as metadata. A block id `b` names the same slot range
// [b * block_size, (b + 1) * block_size) in every layer's pool, on whatever
// device that layer lives; this allocator hands out ids, counts references
// and keeps the prefix cache: full blocks identified by a chained hash of
// their tokens. A block whose last reference is dropped keeps its contents
// and hash ("cached") and is reused by a later prompt with the same prefix,
// until allocation evicts it, least recently used first.
// Allocation is all-or-nothing, lowest free id first (an elastic pool's high
// chunks then empty out, to be given back).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace pagellm {

struct KvBlock {
  int32_t id = 0;
  int32_t ref_count = 0;
  uint64_t hash = 0;  // chained content hash of a full block; valid if has_hash
  bool has_hash = false;
};

struct BlockAllocatorStats {
  int32_t total = 0;
  int32_t populated = 0;        // blocks in memory (total unless the pool is elastic)
  int32_t used = 0;             // ref_count > 0
  int32_t cached = 0;           // ref_count == 0, holding a reusable full block
  uint64_t prefix_queries = 0;  // blocks looked up
  uint64_t prefix_hits = 0;     // blocks found
  uint64_t evictions = 0;
};

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Blocks that allocate() can hand out now: never used, or cached
  // (evictable), in populated chunks.
  int32_t num_free() const { return static_cast<int32_t>(free_.size() + lru_.size()); }
  int32_t num_used() const { return available_blocks() - num_free(); }

  // The elastic pool (kvcache/elastic_pool.h): ids come in chunks of
  // `chunk_blocks` ([c * chunk_blocks, (c + 1) * chunk_blocks), the last one
  // maybe shorter), of which the first `populated` have memory; only their
  // blocks are handed out. When the never-used blocks fall short, grow(c) is
  // asked to populate chunk c, the next one (before cached blocks are
  // evicted): true adds its blocks. Called while every block is free.
  using GrowFn = std::function<bool(int32_t chunk)>;
  void set_chunks(int32_t chunk_blocks, int32_t populated, GrowFn grow);
  int32_t chunk_blocks() const { return chunk_blocks_; }  // 0: one chunk of every block
  int32_t num_chunks() const;
  int32_t populated_chunks() const { return chunks_; }
  int32_t available_blocks() const;  // blocks of the populated chunks
  int32_t chunk_begin(int32_t c) const;
  int32_t chunk_end(int32_t c) const;
  // Grows (if it may) until `n` blocks can be allocated; whether they can.
  bool ensure_free(int32_t n);
  // Takes the top populated chunk out of use: its cached blocks are evicted,
  // its free ones leave the free list. False, changing nothing, while one of
  // its blocks is referenced (or only chunk 0 is left). `dropped` (if any)
  // is called with each cached block and its tokens before its hash goes.
  bool remove_top_chunk(
      const std::function<void(int32_t id, std::span<const int32_t> tokens)>& dropped = {});
  int32_t num_cached() const { return static_cast<int32_t>(lru_.size()); }
  // The cached blocks that allocating `n` more blocks now would evict, in
  // eviction order (none while the never-used free blocks suffice).
  void next_evictions(int32_t n, std::vector<int32_t>& out) const;
  // The tokens a hashed block holds (empty for another block).
  std::span<const int32_t> block_tokens(int32_t id) const {
    return block_tokens_.at(static_cast<size_t>(id));
  }
  // Called by allocate() for each cached block it evicts, with the block's
  // tokens, before its hash is dropped (its bytes are intact until a step
  // writes the block): the prefix tiers keep a copy (kvcache/prefix_tier.h).
  using EvictFn = std::function<void(int32_t id, std::span<const int32_t> tokens)>;
  void set_evict_hook(EvictFn fn) { on_evict_ = std::move(fn); }

  // Takes `n` blocks (ref count 1, no hash), evicting cached blocks when the
  // never-used ones run out; appends their ids to `out`. If fewer than `n`
  // can be had, takes none and returns false.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  // Adds a reference (a block in use, or a cached one being reused).
  void retain(int32_t id);
  // Drops a reference; at zero the block becomes cached (if hashed) or free.
  void release(int32_t id);

  const KvBlock& block(int32_t id) const { return blocks_.at(static_cast<size_t>(id)); }

  // Prefix cache: the block holding the full block with this chained hash and
  // these tokens, if any (in use or cached). Counts a query and maybe a hit.
  std::optional<int32_t> lookup(uint64_t hash, std::span<const int32_t> tokens);
  // The same without counting (a caller that may not reuse every block it
  // finds counts with count_lookups what it looked up and reused).
  std::optional<int32_t> find(uint64_t hash, std::span<const int32_t> tokens) const;
  void count_lookups(uint64_t queries, uint64_t hits) {
    queries_ += queries;
    hits_ += hits;
  }
  // Marks block `id` (in use, full, computed) as holding `tokens` with `hash`.
  // If another block already holds that content, the map keeps the older one.
  void set_hash(int32_t id, uint64_t hash, std::span<const int32_t> tokens);

  BlockAllocatorStats stats() const;

  // Chained hash of one full block: parent's hash (0 for the first block) and its token ids.
  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);

 private:
  void drop_hash(int32_t id);

  std::vector<KvBlock> blocks_;
  std::vector<std::vector<int32_t>> block_tokens_;  // contents of hashed blocks (collision check)
  std::vector<int32_t> free_;                       // never used or unhashed; a min-heap
  std::list<int32_t> lru_;                          // cached, least recently used first
  std::vector<std::list<int32_t>::iterator> lru_pos_;
  std::vector<bool> in_lru_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  uint64_t queries_ = 0, hits_ = 0, evictions_ = 0;
  int32_t chunk_blocks_ = 0;
  int32_t chunks_ = 1;
  GrowFn grow_;
  EvictFn on_evict_;
};

}  // namespace pagellm
