#include "grammar/mask_cache.h"

namespace pagellm {

MaskCache::MaskCache(size_t max_bytes) : max_bytes_(max_bytes) {}

size_t MaskCache::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.uid * 0x9E3779B97F4A7C15ull ^ k.state.size();
  for (int32_t x : k.state) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001b3ull;
  return static_cast<size_t>(h ^ (h >> 31));
}

size_t MaskCache::entry_bytes(const Key& k, const TokenMask& m) {
  // The mask, the key and roughly the list and index nodes around them.
  return m.size() * sizeof(uint64_t) + 2 * k.state.size() * sizeof(int32_t) + 128;
}

std::shared_ptr<GrammarStateCanon> MaskCache::canon(const std::shared_ptr<const Grammar>& g) {
  std::lock_guard lock(mu_);
  // Grammars that ended take their canon with them (their masks age out).
  std::erase_if(canons_, [](const auto& kv) { return kv.second.grammar.expired(); });
  CanonEntry& e = canons_[g.get()];
  if (!e.canon) e = {g, std::make_shared<GrammarStateCanon>()};
  return e.canon;
}

std::shared_ptr<const TokenMask> MaskCache::find(uint64_t uid, const std::vector<int32_t>& key) {
  std::lock_guard lock(mu_);
  // (The Key copies `key`: a few ints.)
  const auto it = index_.find(Key{uid, key});
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->mask;
}

std::shared_ptr<const TokenMask> MaskCache::insert(uint64_t uid, const std::vector<int32_t>& key,
                                                   std::shared_ptr<const TokenMask> mask) {
  std::lock_guard lock(mu_);
  Key k{uid, key};
  if (const auto it = index_.find(k); it != index_.end()) {  // another sequence got there first
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->mask;
  }
  const size_t bytes = entry_bytes(k, *mask);
  lru_.push_front(Entry{k, mask, bytes});
  index_.emplace(std::move(k), lru_.begin());
  stats_.bytes += bytes;
  ++stats_.entries;
  // The newest entry stays even alone over the budget: its sequence uses it now.
  while (stats_.bytes > max_bytes_ && lru_.size() > 1) {
    const Entry& old = lru_.back();
    stats_.bytes -= old.bytes;
    --stats_.entries;
    ++stats_.evictions;
    index_.erase(old.key);
    lru_.pop_back();
  }
  return mask;
}

MaskCache::Stats MaskCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace pagellm
