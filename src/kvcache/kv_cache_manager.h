// Per-sequence KV block bookkeeping over one BlockAllocator per KV group
// (kv_group.h): prefix-cache matching for new prompts, all-or-nothing growth
// with copy-on-write of shared blocks, hashing of blocks as they fill, fork
// and free. Window groups drop the blocks that left their window as the
// sequence advances. Prefix caching needs every layer's blocks of a prefix,
// which window groups drop: it is off when there are window groups.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"
#include "kvcache/prefix_tier.h"
#include "kvcache/state_checkpoints.h"
#include "util/step_worker.h"

namespace pagellm {

// Copy block `src`'s slots into block `dst` in every pool of KV group
// `group` before the step that writes into `dst`.
struct BlockCopy {
  int32_t src;
  int32_t dst;
  int32_t group = 0;
};

// A window group's window and block count (groups 1.. of a KvCacheManager).
struct KvWindowGroup {
  int32_t window = 0;
  int32_t num_blocks = 0;
};

// Blocks looked up and reused by one match_prefix.
struct PrefixLookups {
  uint64_t queries = 0;
  uint64_t hits = 0;
  // Blocks found: with state checkpoints, those past the last checkpoint
  // were found but not kept.
  uint64_t found = 0;
};

class KvCacheManager {
 public:
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool prefix_caching,
                 std::vector<KvWindowGroup> window_groups = {});

  int32_t block_size() const { return block_size_; }
  int64_t capacity_tokens() const {
    return static_cast<int64_t>(alloc_.num_blocks()) * block_size_;
  }
  bool prefix_caching() const { return prefix_caching_; }
  BlockAllocator& allocator() { return alloc_; }
  const BlockAllocator& allocator() const { return alloc_; }
  int32_t n_groups() const { return 1 + static_cast<int32_t>(windows_.size()); }
  // Group g's allocator (0: allocator()) and window (0 for group 0).
  BlockAllocator& allocator(int32_t group);
  const BlockAllocator& allocator(int32_t group) const;
  int32_t window(int32_t group) const {
    return group == 0 ? 0 : windows_[static_cast<size_t>(group - 1)].window;
  }
  // Blocks in use over every group.
  int32_t num_used_all() const;

  // For a sequence with no blocks yet: takes the cached full blocks that
  // match the start of `tokens`, leaving at least one token to compute.
  // Returns the number of tokens they cover (a multiple of the block size).
  // With state checkpoints (hybrid models), only up to the last block that
  // ends where a checkpoint holds the recurrent state: the sequence restores
  // it and computes the rest (only the blocks kept count as hits).
  // The lookups are counted in the allocator's stats, or with `lookups`
  // given, only there: a caller that may give the blocks back unused (and
  // match again later) counts them once it keeps them.
  int64_t match_prefix(std::span<const int32_t> tokens, BlockTable& table,
                       PrefixLookups* lookups = nullptr);
  // Hybrid models' recurrent-state checkpoints (not owned; null: none).
  void set_state_checkpoints(StateCheckpoints* checkpoints) { checkpoints_ = checkpoints; }
  StateCheckpoints* state_checkpoints() const { return checkpoints_; }
  // The chain of tiers beyond the pool (not owned; null: none): committed
  // blocks and the cached blocks group 0 evicts are offered to it, and
  // match_prefix continues there where the pool's match ends (not with state
  // checkpoints).
  void set_prefix_tier(PrefixTier* tier);
  // A request `owner` with `tokens` is queued: the tiers may start reading
  // the blocks that follow the pool's match (PrefixTier::prefetch), so that
  // its match_prefix finds them read. forget_prefetch: it is admitted or gone.
  void prefetch(uint64_t owner, std::span<const int32_t> tokens);
  void forget_prefetch(uint64_t owner);
  // The next `n` allocations' evictions are offered to the tiers to copy
  // during the forward pass (PrefixTier::copy_ahead); copy_ahead_wait()
  // after it, before anything allocates.
  void copy_ahead(int32_t n);
  void copy_ahead_wait();

  // Restores from the tiers. Without deferral a block's bytes are copied in
  // as match_prefix takes it. With it (the engine), match_prefix leaves the
  // copies pending: a table holding such a block is restoring() and must not
  // be computed on; start_restores() runs them on a worker beside the
  // forward pass, complete_restores() waits for them (at once where no
  // thread can be had). Freeing a table that holds a pending block completes
  // them first, so that no block is reused while one is copied into it.
  void set_deferred_restores(bool on) { defer_restores_ = on; }
  bool restoring(const BlockTable& table) const;
  bool has_pending_restores() const { return !pending_blocks_.empty(); }
  void start_restores();
  void complete_restores();
  // Blocks whose copy ran on the worker (for tests and /metrics).
  uint64_t restores_overlapped() const { return restores_overlapped_; }

  // Makes room to write positions [write_from, n_tokens): new blocks as
  // needed, and private copies of shared blocks in that range (copy-on-write,
  // recorded in `copies`). All or nothing: false (and no change) if the free
  // blocks do not suffice.
  bool reserve(BlockTable& table, int64_t write_from, int64_t n_tokens,
               std::vector<BlockCopy>& copies);

  // Records that `tokens[0, n_computed)` are in the cache: hashes the blocks
  // that became full so later prompts can reuse them, and frees the window
  // groups' blocks that no later query can see.
  void commit(std::span<const int32_t> tokens, BlockTable& table, int64_t n_computed);

  // Gives back every block past the first ceil(n_tokens / block_size) in
  // each group: speculative decoding reserved room for drafted tokens and
  // some were rejected. The slots of kept blocks past n_tokens hold stale
  // K/V that the next tokens overwrite; hashes cover only computed blocks,
  // so the prefix cache is unaffected.
  void truncate(BlockTable& table, int64_t n_tokens);

  // `child` shares every block of `parent` (ref counts +1).
  void fork(const BlockTable& parent, BlockTable& child);
  void free(BlockTable& table);

 private:
  // Frees window-group blocks wholly before position `next - W + 1` (the
  // first a query at `next` or later reads).
  void drop_out_of_window(BlockTable& table, int64_t next);
  // A block filled by the tier with `tokens`, which follow the table's last
  // block (taken from the free or cached blocks; ref count 1, no hash yet).
  std::optional<int32_t> from_tier(const BlockTable& table, std::span<const int32_t> tokens);
  // match_prefix with state checkpoints.
  PrefixLookups match_to_checkpoint(std::span<const int32_t> tokens, BlockTable& table);

  int32_t block_size_;
  bool prefix_caching_;
  BlockAllocator alloc_;
  std::vector<KvWindowGroup> windows_;
  std::vector<std::unique_ptr<BlockAllocator>> window_allocs_;
  StateCheckpoints* checkpoints_ = nullptr;
  PrefixTier* tier_ = nullptr;
  bool defer_restores_ = false;
  std::vector<int32_t> pending_blocks_;  // group 0 blocks whose copy has not run
  std::vector<PrefixTier::RestoreCopy> pending_copies_;
  bool restores_running_ = false;
  uint64_t restores_overlapped_ = 0;
  StepWorker restore_worker_;  // last: joined before the rest goes
};

}  // namespace pagellm
