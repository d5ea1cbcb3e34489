#include "kvcache/host_tier.h"

#include <algorithm>
#include <chrono>

#include "kvcache/block_copy.h"
#include "util/host_pages.h"

namespace pagellm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

HostTier::HostTier(HostTierOptions options, BlockFileIdentity identity, KvCacheStorage& storage,
                   int32_t num_blocks, int32_t block_size, PrefixTier* next)
    : options_(options),
      identity_(identity),
      root_key_(identity_key(identity)),
      storage_(storage),
      block_size_(block_size),
      block_bytes_(storage_block_bytes(storage)),
      next_(next),
      key_of_block_(static_cast<size_t>(std::max(num_blocks, 0))),
      parent_of_block_(static_cast<size_t>(std::max(num_blocks, 0))),
      key_valid_(static_cast<size_t>(std::max(num_blocks, 0)), false) {
  if (block_bytes_ > 0)
    capacity_ = static_cast<int32_t>(
        std::min<uint64_t>(options_.max_bytes / block_bytes_, uint64_t{1} << 30));
  range_bytes_ = static_cast<size_t>(capacity_) * block_bytes_;
  if (range_bytes_ > 0) {
    pinned_by_ = device_pool_backend(storage);
    base_ = static_cast<uint8_t*>(pinned_by_ ? pinned_by_->allocate_host(range_bytes_)
                                             : reserve_host_pages(range_bytes_));
  }
  populated_.assign(static_cast<size_t>(capacity_), pinned_by_ != nullptr);
  busy_slot_.assign(static_cast<size_t>(capacity_), false);
  n_populated_ = pinned_by_ ? capacity_ : 0;
  for (int32_t s = capacity_ - 1; s >= 0; --s) free_slots_.push_back(s);
  stats_.capacity_blocks = capacity_;
  stats_.capacity_bytes = range_bytes_;
  stats_.pinned = pinned_by_ != nullptr;
}

HostTier::~HostTier() {
  copy_ahead_wait();
  if (!base_) return;
  if (pinned_by_)
    pinned_by_->free_host(base_, range_bytes_);
  else
    free_host_pages(base_, range_bytes_);
}

bool HostTier::key_of(int32_t block, Hash128& key) const {
  if (block < 0) {
    key = root_key_;
    return true;
  }
  if (static_cast<size_t>(block) >= key_valid_.size() || !key_valid_[static_cast<size_t>(block)])
    return false;
  key = key_of_block_[static_cast<size_t>(block)];
  return true;
}

void HostTier::committed(int32_t block, int32_t parent, std::span<const int32_t> tokens) {
  if (block >= 0 && static_cast<size_t>(block) < key_valid_.size()) {
    Hash128 pk;
    const auto b = static_cast<size_t>(block);
    key_valid_[b] = key_of(parent, pk);
    if (key_valid_[b]) {
      parent_of_block_[b] = pk;
      key_of_block_[b] = block_key(pk, tokens);
    }
  }
  if (next_) next_->committed(block, parent, tokens);
}

void HostTier::drop_lru() {
  const Hash128 key = lru_.front();
  auto it = entries_.find(key);
  Entry& e = it->second;
  // Handed down before its slot is reused (the next tier copies the bytes).
  if (next_) next_->demoted({identity_, key, e.parent, e.tokens}, {slot_ptr(e.slot), block_bytes_});
  free_slots_.push_back(e.slot);
  lru_.pop_front();
  entries_.erase(it);
  ++stats_.evicted;
}

int32_t HostTier::take_slot() {
  if (free_slots_.empty()) {
    if (lru_.empty() || busy_slot_[static_cast<size_t>(entries_.at(lru_.front()).slot)])
      return -1;
    // fetch() staged this tier's least recently used entry for place(): keep it.
    if (staged_ == Staged::kOwn && lru_.front() == staged_key_) {
      if (lru_.size() < 2) return -1;
      lru_.splice(lru_.end(), lru_, lru_.begin());
      entries_.at(staged_key_).lru = std::prev(lru_.end());
    }
    drop_lru();
  }
  const int32_t slot = free_slots_.back();
  if (!populated_[static_cast<size_t>(slot)]) {
    if (!populate_host_range(slot_ptr(slot), block_bytes_)) return -1;  // left free
    populated_[static_cast<size_t>(slot)] = true;
    ++n_populated_;
  }
  free_slots_.pop_back();
  return slot;
}

void HostTier::evicted(int32_t block, std::span<const int32_t> tokens) {
  Hash128 key;
  if (block < 0 || !key_of(block, key)) return;
  if (auto it = entries_.find(key); it != entries_.end()) {  // held already: recently used now
    lru_.splice(lru_.end(), lru_, it->second.lru);
    return;
  }
  try {
    const int32_t slot = take_slot();
    if (slot < 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    copy_block_out(storage_, block, slot_ptr(slot));
    cost_.copied(static_cast<double>(block_bytes_), seconds_since(t0));
    Entry e;
    e.slot = slot;
    e.parent = parent_of_block_[static_cast<size_t>(block)];
    e.tokens.assign(tokens.begin(), tokens.end());
    e.lru = lru_.insert(lru_.end(), key);
    entries_.emplace(key, std::move(e));
    ++stats_.stored;
    stats_.bytes_in += block_bytes_;
  } catch (const std::exception&) {
    // Out of memory, or a device copy failed: the block is not kept.
  }
}

void HostTier::copy_ahead(std::span<const int32_t> blocks,
                          std::span<const std::span<const int32_t>> tokens) {
  copy_ahead_wait();
  if (pinned_by_ || capacity_ == 0) return;
  const size_t most = static_cast<size_t>(std::max(capacity_ / 4, 1));
  try {
    for (size_t i = 0; i < blocks.size() && ahead_.size() < most; ++i) {
      Hash128 key;
      if (!key_of(blocks[i], key) || entries_.count(key)) continue;
      const int32_t slot = take_slot();
      if (slot < 0) break;
      Entry e;
      e.slot = slot;
      e.parent = parent_of_block_[static_cast<size_t>(blocks[i])];
      e.tokens.assign(tokens[i].begin(), tokens[i].end());
      e.lru = lru_.insert(lru_.end(), key);
      entries_.emplace(key, std::move(e));
      busy_slot_[static_cast<size_t>(slot)] = true;
      ahead_.emplace_back(blocks[i], slot);
    }
  } catch (const std::exception&) {
    // Out of memory for the bookkeeping: copy what has a slot.
  }
  if (ahead_.empty()) return;
  ahead_running_ = true;
  const auto copy = [this] {
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& [block, slot] : ahead_) copy_block_out(storage_, block, slot_ptr(slot));
    ahead_seconds_ = seconds_since(t0);
  };
  if (!worker_.start(copy)) copy();  // no thread: copied here
}

void HostTier::copy_ahead_wait() {
  if (!ahead_running_) return;
  worker_.wait();
  ahead_running_ = false;
  const uint64_t bytes = ahead_.size() * block_bytes_;
  cost_.copied(static_cast<double>(bytes), ahead_seconds_);
  stats_.stored += ahead_.size();
  stats_.stored_ahead += ahead_.size();
  stats_.bytes_in += bytes;
  for (const auto& [block, slot] : ahead_) busy_slot_[static_cast<size_t>(slot)] = false;
  ahead_.clear();
}

bool HostTier::fetch(int32_t parent, std::span<const int32_t> tokens) {
  staged_ = Staged::kNone;
  Hash128 pk;
  if (!key_of(parent, pk)) return false;
  const Hash128 key = block_key(pk, tokens);
  const double block_tokens = static_cast<double>(block_size_);
  auto it = entries_.find(key);
  if (it != entries_.end() && std::ranges::equal(it->second.tokens, tokens)) {
    if (!cost_.restore_pays(static_cast<double>(block_bytes_), block_tokens, cost_.copy_rate())) {
      ++stats_.recomputed;
      return false;
    }
    lru_.splice(lru_.end(), lru_, it->second.lru);
    staged_ = Staged::kOwn;
  } else {
    ++stats_.misses;
    // The next tier applies the rule to its own reads (read ahead or not).
    if (!next_ || !next_->fetch(parent, tokens)) return false;
    staged_ = Staged::kNext;
  }
  staged_key_ = key;
  staged_parent_ = pk;
  staged_parent_block_ = parent;
  staged_tokens_.assign(tokens.begin(), tokens.end());
  return true;
}

void HostTier::prefetch(uint64_t owner, int32_t parent, std::span<const int32_t> tokens,
                        size_t held) {
  if (!next_) return;
  Hash128 pk;
  if (!key_of(parent, pk)) return;
  const size_t bs = static_cast<size_t>(block_size_);
  for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i) {
    const auto blk = tokens.subspan(i * bs, bs);
    pk = block_key(pk, blk);
    if (i >= held && !entries_.count(pk)) break;
    held = std::max(held, i + 1);
  }
  next_->prefetch(owner, parent, tokens, held);
}

PrefixTier::RestoreCopy HostTier::place(int32_t block) {
  if (staged_ == Staged::kNone || block < 0 || static_cast<size_t>(block) >= key_valid_.size())
    return {};
  RestoreCopy copy;
  if (staged_ == Staged::kOwn) {
    const int32_t slot = entries_.at(staged_key_).slot;
    ++stats_.hits;
    stats_.bytes_out += block_bytes_;
    // The next tier learns the block's key (and writes it if it lacks it).
    if (next_)
      next_->restored(block, staged_parent_block_, staged_tokens_, {slot_ptr(slot), block_bytes_});
    if (pinned_by_) {
      const auto t0 = std::chrono::steady_clock::now();
      copy_block_in(storage_, block, slot_ptr(slot));
      cost_.copied(static_cast<double>(block_bytes_), seconds_since(t0));
    } else {
      busy_slot_[static_cast<size_t>(slot)] = true;  // not reused till restores_done()
      restoring_slots_.push_back(slot);
      // Not timed: beside a forward pass it would not measure the copy rate.
      copy = [this, block, slot] { copy_block_in(storage_, block, slot_ptr(slot)); };
    }
  } else {
    copy = next_->place(block);
    ++stats_.next_hits;
  }
  const auto b = static_cast<size_t>(block);
  key_of_block_[b] = staged_key_;
  parent_of_block_[b] = staged_parent_;
  key_valid_[b] = true;
  staged_ = Staged::kNone;
  return copy;
}

void HostTier::restores_done() {
  for (int32_t slot : restoring_slots_) busy_slot_[static_cast<size_t>(slot)] = false;
  restoring_slots_.clear();
  if (next_) next_->restores_done();
}

HostTierStats HostTier::stats() const {
  HostTierStats s = stats_;
  s.held_blocks = static_cast<int64_t>(entries_.size());
  s.held_bytes = static_cast<uint64_t>(n_populated_) * block_bytes_;
  return s;
}

}  // namespace pagellm
