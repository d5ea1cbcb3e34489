// The prefix cache's host tier (issue 54): cached full blocks that the KV
// pool evicts are copied into a bounded store in host memory instead of
// being dropped, least recently used first out; a block leaving it goes to the next
// tier (the disk tier, kvcache/disk_tier.h) if there is one. A prompt whose
// match in the pool ends continues here, then in the next tier: a block is
// restored by copy when that is cheaper than computing it again (the
// measured-cost rule below), else it is computed.
//
// Copies: the blocks the pool will evict next are copied by a worker thread
// while the forward pass runs (copy_ahead; at most a quarter of the slots a
// step), so eviction finds them kept; what it does not find is copied on the
// engine thread then. A restore's copy into the pool is handed back by
// place() for the KV manager to run beside the pass (its slot is kept until
// restores_done()). A pool in a device's memory is copied on the engine
// thread (its backend's stream belongs to the pass), from pinned memory.
//
// Memory: capacity = floor(max_bytes / block bytes) slots, one range. When
// the pool is a device's (a GPU's, or the staged stand-in's), the range comes
// from that backend's host allocation (pinned on CUDA: the copies are DMA);
// else it is reserved and each slot populated when first used (an idle
// server holds little; a slot that cannot be had is not stored, never a
// fault). The planner charges max_bytes to host RAM (PlanRequest::
// host_tier_bytes), so the swap guard counts it like any other byte.
//
// Restore or recompute: restoring a block costs bytes / copy rate (measured
// on this tier's copies, EWMA; the next tier's reads are timed the same way),
// computing it costs block_size / prefill rate (tokens per second of the
// engine's prompt steps, prefilled()); a block is restored while the first is
// smaller, or while either rate is still unmeasured. Both costs grow
// linearly with a prefix's length, so the per-block rule is the rule for the
// whole prefix (attention's quadratic term only favours restoring).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvcache/block_file.h"
#include "kvcache/kv_cache_storage.h"
#include "kvcache/prefix_tier.h"
#include "kvcache/restore_cost.h"
#include "util/step_worker.h"

namespace pagellm {

struct HostTierOptions {
  uint64_t max_bytes = 0;  // 0: no host tier
};

struct HostTierStats {
  uint64_t hits = 0;            // blocks restored from the host tier
  uint64_t misses = 0;          // lookups it did not hold
  uint64_t recomputed = 0;      // held, but computing was cheaper
  uint64_t stored = 0;          // blocks copied in from the pool
  uint64_t stored_ahead = 0;    // of them, copied off the engine thread (copy_ahead)
  uint64_t evicted = 0;         // blocks dropped to make room (to the next tier if any)
  uint64_t bytes_in = 0;        // bytes copied in
  uint64_t bytes_out = 0;       // bytes restored into the pool
  uint64_t next_hits = 0;       // blocks restored from the next tier through this one
  int64_t held_blocks = 0;
  int64_t capacity_blocks = 0;
  uint64_t capacity_bytes = 0;  // capacity_blocks x block bytes
  uint64_t held_bytes = 0;      // populated slots' bytes
  bool pinned = false;          // the range is a device backend's host memory
};

class HostTier final : public PrefixTier {
 public:
  // `storage`'s group 0 pools (num_blocks blocks) are read and written;
  // `identity` roots the key chain (the disk tier's, so that blocks handed
  // down keep their keys); `next` (not owned; null: none) is asked after
  // this tier and gets the blocks it drops. Throws SystemError when the
  // memory cannot be reserved.
  HostTier(HostTierOptions options, BlockFileIdentity identity, KvCacheStorage& storage,
           int32_t num_blocks, int32_t block_size, PrefixTier* next);
  ~HostTier() override;
  HostTier(const HostTier&) = delete;
  HostTier& operator=(const HostTier&) = delete;

  void committed(int32_t block, int32_t parent, std::span<const int32_t> tokens) override;
  bool fetch(int32_t parent, std::span<const int32_t> tokens) override;
  RestoreCopy place(int32_t block) override;
  void restores_done() override;
  void evicted(int32_t block, std::span<const int32_t> tokens) override;
  void copy_ahead(std::span<const int32_t> blocks,
                  std::span<const std::span<const int32_t>> tokens) override;
  void copy_ahead_wait() override;

  // Continues past the blocks this tier holds, in the next tier.
  void prefetch(uint64_t owner, int32_t parent, std::span<const int32_t> tokens,
                size_t held) override;
  void forget_prefetch(uint64_t owner) override {
    if (next_) next_->forget_prefetch(owner);
  }
  // The engine's prompt steps: `tokens` computed in `seconds` (the next tier learns it too).
  void prefilled(double tokens, double seconds) override {
    cost_.prefilled(tokens, seconds);
    if (next_) next_->prefilled(tokens, seconds);
  }
  const RestoreCost& cost() const { return cost_; }
  HostTierStats stats() const;
  size_t block_bytes() const { return block_bytes_; }

 private:
  struct KeyHash {
    size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo); }
  };
  struct Entry {
    int32_t slot = 0;
    Hash128 parent;
    std::vector<int32_t> tokens;
    std::list<Hash128>::iterator lru;
  };
  uint8_t* slot_ptr(int32_t slot) const { return base_ + static_cast<size_t>(slot) * block_bytes_; }
  bool key_of(int32_t block, Hash128& key) const;
  // A slot for a new entry: a free one, else the least recently used
  // entry's (handed to the next tier); -1 when none can be had.
  int32_t take_slot();
  void drop_lru();

  HostTierOptions options_;
  BlockFileIdentity identity_;
  Hash128 root_key_;
  KvCacheStorage& storage_;
  int32_t block_size_;
  size_t block_bytes_;
  PrefixTier* next_;
  Backend* pinned_by_ = nullptr;  // the device backend whose host memory base_ is
  uint8_t* base_ = nullptr;
  size_t range_bytes_ = 0;
  int32_t capacity_ = 0;
  std::vector<bool> populated_;
  int32_t n_populated_ = 0;
  std::vector<int32_t> free_slots_;  // a stack: the lowest slot on top
  std::unordered_map<Hash128, Entry, KeyHash> entries_;
  std::list<Hash128> lru_;  // least recently used first
  // Each pool block's chained key and its parent's (valid while hashed).
  std::vector<Hash128> key_of_block_, parent_of_block_;
  std::vector<bool> key_valid_;
  // fetch()'s find for place(): in this tier (own) or the next one.
  enum class Staged { kNone, kOwn, kNext } staged_ = Staged::kNone;
  Hash128 staged_key_, staged_parent_;
  int32_t staged_parent_block_ = -1;
  std::vector<int32_t> staged_tokens_;
  RestoreCost cost_;
  HostTierStats stats_;
  // copy_ahead's copies (block, slot) while the worker runs them, and the
  // slots they fill (take_slot must not hand such an entry down unfilled).
  std::vector<std::pair<int32_t, int32_t>> ahead_;
  // Slots a worker uses: written by copy_ahead, or read by a restore copy.
  std::vector<bool> busy_slot_;
  std::vector<int32_t> restoring_slots_;
  double ahead_seconds_ = 0;  // written by the worker, read after wait()
  bool ahead_running_ = false;
  StepWorker worker_;  // last: joined before the rest goes
};

}  // namespace pagellm
