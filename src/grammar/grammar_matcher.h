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
// equal states are equal sets of ids. Mask walks leave nodes no state
// reaches: advance() compacts the arena to what the current state reaches
// once it has doubled, so a long structured output keeps a bounded arena.
// A grammar ambiguous at every byte costs more per byte the deeper its open
// nestings go (inherent to following every parse); past a fixed cost per
// byte the step throws instead (bounded latency for every other sequence).
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
  const std::shared_ptr<const Grammar>& shared_grammar() const { return g_; }

  // The state after `byte` from `stacks` (sorted, unique; empty: refused).
  void step(const std::vector<int32_t>& stacks, uint8_t byte, std::vector<int32_t>& out);

  // A node: (rule, alternative, element index of what comes next, the
  // interned set of parent nodes to go on at when the alternative ends).
  struct Node {
    int32_t rule, alt, pos, parents;
    bool operator==(const Node&) const = default;
  };
  struct NodeHash {
    size_t operator()(const Node& n) const;
  };
  // A node of the arena and a parent set (sorted member node ids, -1: the
  // bottom), by id: for reading a state's structure (grammar/state_canon.h).
  const Node& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& parent_set(int32_t id) const { return sets_[static_cast<size_t>(id)]; }
  size_t n_nodes() const { return nodes_.size(); }
  size_t n_sets() const { return sets_.size(); }

  // Nodes plus parent-set entries held: the matcher's memory, in entries.
  // Past 2^21 a step throws Error ("the grammar is too ambiguous ...") and
  // the state stays as it was; so does a step that costs more than 2^15
  // parse operations (work_done()).
  size_t arena_size() const { return nodes_.size() + set_entries_ + expanded_.size(); }
  // Ids change when advance() compacts the arena (drops what the current
  // state no longer reaches: the dead ends of mask walks, states left
  // behind): a cache keyed by stacks() must be dropped when this changes.
  uint64_t generation() const { return generation_; }
  // Parse operations so far (nodes expanded, parent entries merged).
  uint64_t work_done() const { return work_done_; }
  // advance() compacts once the arena passes this many entries (then twice
  // what is live, at least 2^16); tests set it low to compact at every byte.
  void set_compaction_threshold(size_t entries);

 private:
  int32_t intern(const Node& n);
  void check_arena() const;
  // Past kMaxStepWork in one step: throws Error (the state stays as it was).
  void check_step_work() const;
  // `members` sorted and unique.
  int32_t intern_set(const std::vector<int32_t>& members);
  static uint64_t set_hash(const std::vector<int32_t>& members);
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
  // Keeps only the nodes and sets reachable from stacks_, renumbered in
  // their old order (so sorted id lists stay sorted).
  void compact();
  void compact_if_due();

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  std::unordered_map<Node, int32_t, NodeHash> node_ids_;
  std::vector<std::vector<int32_t>> sets_;
  std::unordered_multimap<uint64_t, int32_t> set_ids_;  // hash of members -> set id
  size_t set_entries_ = 0;
  std::vector<int32_t> after_;  // memo of after(), -2: not yet
  // The nodes a rule-reference node expands to: expanded_[expand_at_[id] ...]
  // for as many as the rule has alternatives (-1: not yet).
  std::vector<int64_t> expand_at_;
  std::vector<int32_t> expanded_;
  std::vector<int32_t> stacks_;
  std::vector<int32_t> scratch_, work_, merged_;
  // alt_base_[rule][alt] + pos: a grammar position as one number, and the
  // tops close() found at each (empty between steps) and which it touched.
  std::vector<std::vector<uint32_t>> alt_base_;
  std::vector<std::vector<int32_t>> buckets_;
  std::vector<int32_t> touched_;
  // Nodes already expanded in this step (seen_[id] == epoch_): a cycle of
  // tail references comes back to a node it has expanded, and a node's
  // expansion is the same from wherever it was reached.
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  uint64_t generation_ = 0;
  uint64_t work_done_ = 0, step_start_ = 0;
  size_t compact_at_ = size_t{1} << 16;
  size_t min_compact_at_ = size_t{1} << 16;
};

// Whether `g` matches all of `text` (for tests and tools).
bool grammar_accepts(const std::shared_ptr<const Grammar>& g, std::string_view text);

}  // namespace pagellm
