#include "grammar/grammar_cache.h"

#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pagellm {

namespace {

// Bounds: schemas are a few KiB; a 1 MiB grammar text is the parser's limit.
constexpr size_t kMaxGrammars = 64;
constexpr size_t kMaxTextBytes = size_t{16} << 20;

struct Cache {
  struct Entry {
    std::string key;  // start, NUL, text
    std::shared_ptr<const Grammar> grammar;
  };
  std::mutex mu;
  std::list<Entry> lru;  // newest first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index;  // views of Entry::key
  GrammarCacheStats stats;
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

std::shared_ptr<const Grammar> compile_grammar_shared(std::string_view text,
                                                      std::string_view start) {
  std::string key;
  key.reserve(start.size() + 1 + text.size());
  key.append(start).push_back('\0');
  key.append(text);
  Cache& c = cache();
  {
    std::lock_guard lock(c.mu);
    if (const auto it = c.index.find(key); it != c.index.end()) {
      ++c.stats.hits;
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      return it->second->grammar;
    }
  }
  // Compiled outside the lock (up to 1 MiB of text); two threads compiling
  // the same text at once keep the first one cached.
  std::shared_ptr<const Grammar> g = Grammar::parse(text, start);
  std::lock_guard lock(c.mu);
  ++c.stats.compiles;
  if (const auto it = c.index.find(key); it != c.index.end()) return it->second->grammar;
  if (key.size() > kMaxTextBytes) return g;
  c.lru.push_front({std::move(key), g});
  c.index.emplace(c.lru.front().key, c.lru.begin());
  c.stats.text_bytes += c.lru.front().key.size();
  while (c.lru.size() > kMaxGrammars || c.stats.text_bytes > kMaxTextBytes) {
    c.stats.text_bytes -= c.lru.back().key.size();
    c.index.erase(c.lru.back().key);
    c.lru.pop_back();
  }
  c.stats.entries = c.lru.size();
  return g;
}

GrammarCacheStats grammar_cache_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  return c.stats;
}

}  // namespace pagellm
