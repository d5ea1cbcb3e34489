// Where one sequence is in its grammar: a pushdown automaton over bytes run
// on a graph-structured stack.
//
// A state is a set of stack tops, each a position in the grammar ("the next
// byte must be in this range") over a set of parents (the positions to go on
// at when the top's alternative ends); a parent is such a node too, and -1 is
// the bottom (the input may end there). A byte keeps the tops whose range
// holds it, moves them on and expands rule references until ranges are on
// top again; tops at the same grammar position are then merged into one node
// over the union of their parents. So a state has at most one top per byte
// range of the grammar however ambiguous the grammar is: an ambiguous
// nesting depth (`expr ::= term+ (root "+" term)*`) or a choice of
// continuations at every level is a wider parent set, not exponentially many
// stacks as it was when every path down the rules was a stack of its own.
//
// Nodes and parent sets are interned in an arena the matcher owns (so
// sequences never share mutable state; a copy is an independent matcher), so
// equal states are equal sets of ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace pagellm {

class GrammarMatcher {
 public:
  // The start state of `g` (the root rule expanded).
  explicit GrammarMatcher(std::shared_ptr<const Grammar> g);

  // Consumes one byte; false (state unchanged) when no stack takes it.
  bool advance(uint8_t byte);
  // Consumes `bytes` in order; false (state unchanged) when one is refused.
  bool advance(std::string_view bytes);
  // Whether the input may end here.
  bool accepting() const;
  // No stack left: nothing can follow (a grammar whose language is empty).
  bool dead() const { return stacks_.empty(); }
  // The state: sorted node ids of the tops (-1 first: the input may end).
  const std::vector<int32_t>& stacks() const { return stacks_; }
  const Grammar& grammar() const { return *g_; }

  // The state after `byte` from `stacks` (sorted, unique; empty: refused).
  void step(const std::vector<int32_t>& stacks, uint8_t byte, std::vector<int32_t>& out);

  // A node: (rule, alternative, element index of what comes next, the
  // interned set of parent nodes to go on at when the alternative ends).
  struct Node {
    int32_t rule, alt, pos, parents;
    bool operator==(const Node&) const = default;
  };
  // Nodes plus parent-set entries held: the matcher's memory, in entries.
  // Past 2^21 a step throws Error ("the grammar is too ambiguous ...") and
  // the state stays as it was.
  size_t arena_size() const { return nodes_.size() + set_entries_; }

 private:
  int32_t intern(const Node& n);
  void check_arena() const;
  // `members` sorted and unique.
  int32_t intern_set(const std::vector<int32_t>& members);
  // The parent set for what follows node `id`'s current element: its own
  // parents when the element ends its alternative (a tail call, so right
  // recursion does not deepen the stacks), else the node one element on.
  // A star waiting on the same star folds into it (L L = L for a star rule's
  // language L): the node whose rest is exactly star r, over a parent whose
  // rest is exactly r too, is that parent. Memoised per node.
  int32_t after(int32_t id);
  int32_t rest_star(const Node& n) const;
  // Expands the nodes queued in work_ (rule references on top replaced by
  // their alternatives, ended alternatives by their parents) into tops in
  // `out`, then merges tops at the same grammar position.
  void close(std::vector<int32_t>& out);
  void begin();

  std::shared_ptr<const Grammar> g_;
  struct NodeHash {
    size_t operator()(const Node& n) const;
  };
  std::vector<Node> nodes_;
  std::unordered_map<Node, int32_t, NodeHash> node_ids_;
  std::vector<std::vector<int32_t>> sets_;
  std::unordered_multimap<uint64_t, int32_t> set_ids_;  // hash of members -> set id
  size_t set_entries_ = 0;
  std::vector<int32_t> after_;  // memo of after(), -2: not yet
  std::vector<int32_t> stacks_;
  std::vector<int32_t> scratch_, work_, merged_;
  // Nodes already expanded in this step (seen_[id] == epoch_): a cycle of
  // tail references comes back to a node it has expanded, and a node's
  // expansion is the same from wherever it was reached.
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
};

// Whether `g` matches all of `text` (for tests and tools).
bool grammar_accepts(const std::shared_ptr<const Grammar>& g, std::string_view text);

}  // namespace pagellm
