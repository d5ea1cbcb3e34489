// Recurrent-state checkpoints for the prefix cache (hybrid models: gated
// delta-net layers beside attention). A recurrent layer's state after a
// prompt prefix cannot be rebuilt from cached K/V blocks, so the engine saves
// a copy of a sequence's state when its prompt reaches a checkpoint position
// (a multiple of the interval, itself a multiple of the block size and of the
// delta-rule kernel's chunk, 64); a later prompt with the same prefix restores
// the nearest one and computes the rest (KvCacheManager::match_prefix).
//
// This is the metadata: C entries, each a slot of the state pools
// (slots first_slot .. first_slot + C - 1, after the running sequences'), keyed
// by the chained hash of the block that ends at the checkpoint's position
// (the BlockAllocator's hash) and checked against the prefix's tokens (as the
// blocks are). Eviction is a segmented LRU: entries known to be shared (saved
// where prompts were seen to share a prefix, or restored since) go before the
// speculative ones (every interval of a new prompt) only when no speculative
// one is left, least recently used first in each. The copies themselves go
// through the Batch (state_saves, state_copies).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace pagellm {

struct StateCheckpointStats {
  int32_t capacity = 0;
  int32_t stored = 0;
  uint64_t saves = 0;
  uint64_t restores = 0;
  uint64_t evictions = 0;
};

class StateCheckpoints {
 public:
  // `capacity` entries in state slots [first_slot, first_slot + capacity),
  // one every `interval` tokens (a positive multiple of 64 and of the block
  // size; checked by the caller that knows both).
  StateCheckpoints(int32_t first_slot, int32_t capacity, int32_t interval);

  int32_t capacity() const { return static_cast<int32_t>(entries_.size()); }
  int32_t interval() const { return interval_; }
  int32_t first_slot() const { return first_slot_; }

  // The slot holding the state after `prefix` (whose last full block has
  // chained hash `hash`), if any; marks it recently used.
  std::optional<int32_t> find(uint64_t hash, std::span<const int32_t> prefix);
  bool contains(uint64_t hash, std::span<const int32_t> prefix) const;
  // Takes an entry for the state after `prefix` (evicting one when all are
  // taken) and returns its slot: the caller copies the sequence's state there
  // before that slot is read or the sequence moves on. `shared`: other
  // prompts are known to share the prefix (kept longer).
  int32_t store(uint64_t hash, std::span<const int32_t> prefix, bool shared = false);
  // Forgets the entry in `slot` (its copy did not happen).
  void drop(int32_t slot);
  // Counts a restore (the engine copies an entry into a sequence's slot).
  void count_restore() { ++restores_; }

  StateCheckpointStats stats() const;

 private:
  struct Entry {
    bool used = false;
    uint64_t hash = 0;
    std::vector<int32_t> prefix;
    bool shared = false;
    std::list<int32_t>::iterator lru;  // in shared_ or speculative_
  };
  std::list<int32_t>& list_of(const Entry& e) { return e.shared ? shared_ : speculative_; }
  const Entry* lookup(uint64_t hash, std::span<const int32_t> prefix) const;
  void unlink(int32_t index);

  int32_t first_slot_;
  int32_t interval_;
  std::vector<Entry> entries_;
  // Used entries' indices, least recently used first.
  std::list<int32_t> shared_, speculative_;
  std::vector<int32_t> free_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  uint64_t saves_ = 0, restores_ = 0, evictions_ = 0;
};

}  // namespace pagellm
