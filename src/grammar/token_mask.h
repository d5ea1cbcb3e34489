// Which tokens a grammar allows next: the vocabulary's byte strings in a
// trie, walked once per grammar state (a subtree is cut where the state dies,
// so shared prefixes are matched once), and the result cached per state in a
// MaskCache shared by the sequences of the vocabulary (under the state's
// canonical key, so sequences of the same grammar share masks): states recur
// (every character inside a JSON string returns to the same one), so most
// steps cost a cache lookup and the masking pass. The walk
// itself memoises the matcher's byte steps as a table over interned states:
// tens of thousands of trie prefixes lead to a few dozen states (a string's
// next character, a number's next digit), so a walk is mostly table lookups
// instead of one parser step per trie node. Where the state takes every
// token of a byte class (grammar/token_classes.h: string bodies, digits,
// whitespace, printable ASCII) the class is set at once and the walk skips
// the subtrees holding only its tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/mask_cache.h"
#include "grammar/state_canon.h"
#include "grammar/token_classes.h"

namespace pagellm {

// The vocabulary as a grammar sees it: each token's bytes (empty for tokens
// a grammar never allows, e.g. control tokens) and the end-of-generation ids
// (allowed exactly where the grammar may end). Immutable; shared by every
// sequence.
class GrammarVocab {
 public:
  GrammarVocab(std::vector<std::string> token_bytes, std::vector<int32_t> eog_ids);
  int32_t n_tokens() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  bool is_eog(int32_t id) const;

  struct TrieEdge {
    uint8_t byte;
    uint16_t walk_mask;  // the child's (TokenClasses::walk_needed)
    int32_t node;
  };
  struct TrieNode {
    std::vector<TrieEdge> children;  // by byte, ascending
    std::vector<int32_t> tokens;     // ending here
  };
  const std::vector<TrieNode>& trie() const { return trie_; }
  const TokenClasses& classes() const { return classes_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_;  // sorted
  std::vector<TrieNode> trie_;  // node 0: the root
  TokenClasses classes_;
};

inline bool mask_allows(const TokenMask& m, int32_t id) {
  return (m[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

// Masks for one sequence's matcher: always the same matcher (its byte-step
// table and canonical-id memo are keyed by that matcher's ids). Used by one
// thread at a time; the MaskCache may be shared.
class TokenMasker {
 public:
  // `cache` null: a cache of its own.
  explicit TokenMasker(std::shared_ptr<const GrammarVocab> vocab,
                       std::shared_ptr<MaskCache> cache = nullptr);

  // The tokens allowed after the matcher's current state (valid until the
  // next call).
  const TokenMask& mask(GrammarMatcher& m);
  // The same, shared: held by the caller, it stays valid.
  std::shared_ptr<const TokenMask> shared_mask(GrammarMatcher& m);
  // logits[i] = -infinity where `mask` does not allow token i; returns how
  // many are allowed.
  static int64_t apply(const TokenMask& mask, float* logits, int64_t n);

  // The mask walked now, neither looked up nor cached (benchmarks, tests).
  void compute_uncached(GrammarMatcher& m, TokenMask& out);
  // Whether whole classes are set at once (on unless PAGELLM_MASK_CLASSES=0;
  // off: every token is walked, as the reference for tests and benchmarks).
  void set_class_skip(bool on) { class_skip_ = on; }
  // The classes whose every token the matcher's current state takes (the
  // ones a mask of it sets at once).
  ClassSet admitted_classes(GrammarMatcher& m);

  // This masker's lookups in the cache (a hit may be another sequence's mask).
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  const std::shared_ptr<MaskCache>& cache() const { return cache_; }

 private:
  // Starts the step table again when the matcher renumbered its states.
  void follow(const GrammarMatcher& m);
  void compute(GrammarMatcher& m, TokenMask& out);
  // The classes whose every token interned state `state` takes: each class
  // whose bytes all lead, from `state` and the states they reach (a few at
  // most), to states that take them all again.
  ClassSet admitted_classes(GrammarMatcher& m, int32_t state);
  // The interned state after `byte` from interned state `from` (kDead: refused).
  int32_t next_state(GrammarMatcher& m, int32_t from, uint8_t byte);
  int32_t intern_state(const std::vector<int32_t>& stacks);
  void forget_states();

  std::shared_ptr<const GrammarVocab> vocab_;
  std::shared_ptr<MaskCache> cache_;
  std::shared_ptr<GrammarStateCanon> canon_;
  const Grammar* canon_of_ = nullptr;  // the grammar canon_ names states of
  GrammarStateCanon::Memo memo_;
  std::vector<int32_t> key_;
  std::shared_ptr<const TokenMask> current_;
  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };
  // Interned matcher states (sorted stack tops) and their byte steps:
  // steps_[state * 256 + byte] = the next state, kUnknown or kDead.
  static constexpr int32_t kUnknown = -2, kDead = -1;
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> state_ids_;
  std::vector<const std::vector<int32_t>*> states_;
  std::vector<int32_t> steps_;
  std::vector<int32_t> scratch_;
  uint64_t hits_ = 0, misses_ = 0;
  bool class_skip_;
  uint64_t generation_ = 0;  // of the matcher whose states the step table holds
};

}  // namespace pagellm
