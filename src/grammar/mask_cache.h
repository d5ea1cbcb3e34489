// Token masks shared by every sequence of one vocabulary: keyed by a
// grammar state's canonical key (grammar/state_canon.h), so 16 requests
// with the same schema (the same compiled Grammar, see grammar_cache.h)
// compute each state's mask once between them. Least recently used masks
// go first once the cache holds more than its byte budget. Thread-safe:
// sequences draw on the thread pool's workers and masks are computed off
// the engine thread.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/state_canon.h"

namespace pagellm {

// Bit i set: token i allowed.
using TokenMask = std::vector<uint64_t>;

class MaskCache {
 public:
  explicit MaskCache(size_t max_bytes = size_t{64} << 20);

  // The canon of `g`'s states, one per live grammar (made on first use).
  std::shared_ptr<GrammarStateCanon> canon(const std::shared_ptr<const Grammar>& g);

  // The mask cached under (uid, key), or null; a hit makes it the newest.
  std::shared_ptr<const TokenMask> find(uint64_t uid, const std::vector<int32_t>& key);
  // Caches `mask` unless the key has one already; returns the one cached.
  std::shared_ptr<const TokenMask> insert(uint64_t uid, const std::vector<int32_t>& key,
                                          std::shared_ptr<const TokenMask> mask);

  struct Stats {
    uint64_t hits = 0, misses = 0, evictions = 0;
    size_t entries = 0, bytes = 0;
  };
  Stats stats() const;
  size_t max_bytes() const { return max_bytes_; }

 private:
  struct Key {
    uint64_t uid;
    std::vector<int32_t> state;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    Key key;
    std::shared_ptr<const TokenMask> mask;
    size_t bytes;
  };
  static size_t entry_bytes(const Key& k, const TokenMask& m);

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // newest first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  Stats stats_;
  struct CanonEntry {
    std::weak_ptr<const Grammar> grammar;  // the address is this grammar's while it lives
    std::shared_ptr<GrammarStateCanon> canon;
  };
  std::unordered_map<const Grammar*, CanonEntry> canons_;
};

}  // namespace pagellm
