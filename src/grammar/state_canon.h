// Canonical names for grammar states, equal across the matchers of one
// grammar: a matcher numbers its nodes in the order its own walks met them,
// so two sequences in the same state hold different ids; here every node is
// named by its structure (grammar position, canonical parent set), interned
// once for all matchers (hash-consing: a node's parents are interned before
// it, so a state of any depth costs one lookup per node never seen before).
// A state's key, its tops' canonical ids sorted, is then equal for equal
// states of any two matchers, and masks cached under it are shared.
//
// Thread-safe (one mutex; a key costs a few memo reads per step). Bounded:
// past kMaxEntries the tables start again under a new uid(), so keys made
// before never equal keys made after.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_matcher.h"

namespace pagellm {

class GrammarStateCanon {
 public:
  GrammarStateCanon();

  // One matcher's memo of its node and set ids' canonical ids; valid while
  // the matcher's generation() and this canon's uid stay the same. Each
  // matcher needs its own.
  struct Memo {
    uint64_t matcher_generation = 0;
    uint64_t canon_uid = 0;
    std::vector<int32_t> node, set;  // -1: not yet
  };

  // The key of `m`'s current state: its tops' canonical ids, sorted (-1, the
  // bottom, first), and in `*uid` the uid the ids belong to.
  void key(const GrammarMatcher& m, Memo& memo, std::vector<int32_t>& out, uint64_t* uid);

  // Unique across every canon of the process (and each restart of one).
  uint64_t uid() const;
  size_t size() const;  // nodes plus set entries interned

  static constexpr size_t kMaxEntries = size_t{1} << 20;

 private:
  int32_t canonical_node(const GrammarMatcher& m, Memo& memo, int32_t id);
  void restart();

  // A node of the canonical form: a matcher node whose parents are a
  // canonical set id.
  using NodeKey = GrammarMatcher::Node;
  using NodeKeyHash = GrammarMatcher::NodeHash;
  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };
  mutable std::mutex mu_;
  uint64_t uid_;
  std::unordered_map<NodeKey, int32_t, NodeKeyHash> nodes_;
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> sets_;
  size_t set_entries_ = 0;
  std::vector<int32_t> todo_, members_;
};

}  // namespace pagellm
