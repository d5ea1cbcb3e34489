#include "kvcache/state_checkpoints.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"

namespace pagellm {

StateCheckpoints::StateCheckpoints(int32_t first_slot, int32_t capacity, int32_t interval)
    : first_slot_(first_slot), interval_(interval) {
  if (first_slot < 0 || capacity < 0 || interval <= 0)
    throw ConfigError(fmt::format("invalid state checkpoints: {} from slot {}, every {} tokens",
                                  capacity, first_slot, interval));
  entries_.resize(static_cast<size_t>(capacity));
  for (int32_t i = capacity; i-- > 0;) free_.push_back(i);
}

const StateCheckpoints::Entry* StateCheckpoints::lookup(uint64_t hash,
                                                        std::span<const int32_t> prefix) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return nullptr;
  const Entry& e = entries_[static_cast<size_t>(it->second)];
  // A hash collision must not hand out another prefix's state.
  if (!std::equal(e.prefix.begin(), e.prefix.end(), prefix.begin(), prefix.end())) return nullptr;
  return &e;
}

bool StateCheckpoints::contains(uint64_t hash, std::span<const int32_t> prefix) const {
  return lookup(hash, prefix) != nullptr;
}

std::optional<int32_t> StateCheckpoints::find(uint64_t hash, std::span<const int32_t> prefix) {
  const Entry* e = lookup(hash, prefix);
  if (!e) return std::nullopt;
  const int32_t i = by_hash_.at(hash);
  Entry& used = entries_[static_cast<size_t>(i)];
  // Restored: shared from now on, and the most recently used.
  shared_.splice(shared_.end(), list_of(used), used.lru);
  used.shared = true;
  return first_slot_ + i;
}

void StateCheckpoints::unlink(int32_t index) {
  Entry& e = entries_[static_cast<size_t>(index)];
  auto it = by_hash_.find(e.hash);
  if (it != by_hash_.end() && it->second == index) by_hash_.erase(it);
  list_of(e).erase(e.lru);
  e.used = false;
  e.prefix.clear();
}

int32_t StateCheckpoints::store(uint64_t hash, std::span<const int32_t> prefix, bool shared) {
  if (entries_.empty()) throw Error("no state checkpoint entries");
  if (auto it = by_hash_.find(hash); it != by_hash_.end()) {
    // The same key again (a collision, or a prefix saved twice): replace it.
    const int32_t i = it->second;
    unlink(i);
    free_.push_back(i);
  }
  int32_t i;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
  } else {
    i = !speculative_.empty() ? speculative_.front() : shared_.front();
    unlink(i);
    ++evictions_;
  }
  Entry& e = entries_[static_cast<size_t>(i)];
  e.used = true;
  e.shared = shared;
  e.hash = hash;
  e.prefix.assign(prefix.begin(), prefix.end());
  e.lru = list_of(e).insert(list_of(e).end(), i);
  by_hash_[hash] = i;
  ++saves_;
  return first_slot_ + i;
}

void StateCheckpoints::drop(int32_t slot) {
  const int32_t i = slot - first_slot_;
  if (i < 0 || i >= capacity()) throw Error(fmt::format("state slot {} is no checkpoint", slot));
  if (!entries_[static_cast<size_t>(i)].used) return;
  unlink(i);
  free_.push_back(i);
}

StateCheckpointStats StateCheckpoints::stats() const {
  StateCheckpointStats s;
  s.capacity = capacity();
  s.stored = static_cast<int32_t>(shared_.size() + speculative_.size());
  s.saves = saves_;
  s.restores = restores_;
  s.evictions = evictions_;
  return s;
}

}  // namespace pagellm
