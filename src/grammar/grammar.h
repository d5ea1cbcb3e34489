// A GBNF grammar (llama.cpp's grammar syntax) compiled to a pushdown
// automaton over bytes, and the state of one sequence matching it.
//
// Syntax: rules `name ::= alternatives` (names [a-zA-Z0-9-_]); alternatives
// separated by `|`; elements: "literal" (escapes \n \r \t \\ \" \[ \] \xHH
// \uHHHH \UHHHHHHHH), [character class] / [^negated] with ranges a-z and the
// same escapes, `.` (any character), a rule name, ( group ); each may be
// followed by *, +, ?, {m}, {m,}, {m,n}; `#` starts a comment to the end of
// the line. Newlines end a rule unless inside ( ) or after `|` / `::=`. The
// start rule is `root`. Characters are Unicode code points matched as their
// UTF-8 bytes (classes become byte-range sequences at compile time).
//
// Compiled form: every rule a list of alternatives, each a sequence of
// elements: a byte range [lo, hi] or a rule reference (groups and
// repetitions become generated rules). Left recursion is refused where it
// would never stop expanding: a rule that can reach itself before consuming
// a byte through a reference with more of its alternative after it. Cycles
// of references that end their alternatives (a star of a nullable item) are
// allowed: expanding them comes back to a node already expanded.
//
// Matching: a state is a set of stacks of positions ("what must come next"),
// each stack a path down the rules; a byte keeps the stacks whose top range
// holds it, pops it and expands rule references on top until a range is on
// top or the stack is empty (empty = the input may end here). Stacks are
// interned in the grammar's arena (nodes shared between stacks, sequences and
// states), so equal states are equal sets of ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/error.h"

namespace pagellm {

// A grammar that does not parse or compile: the message names the byte
// offset and what was expected there.
class GrammarError : public Error {
 public:
  GrammarError(const std::string& msg, size_t offset) : Error(msg), offset_(offset) {}
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

class Grammar {
 public:
  // Parses and compiles `text`; throws GrammarError ("at byte N: ...").
  // Limits: 1 MiB of text, 200,000 compiled elements, repetition bounds up
  // to 10,000.
  static std::shared_ptr<const Grammar> parse(std::string_view text);

  struct Element {
    enum Kind : uint8_t { kBytes, kRule } kind = kBytes;
    uint8_t lo = 0, hi = 0;  // kBytes: lo <= byte <= hi
    int32_t rule = -1;       // kRule
  };
  // rules[r][a] = alternative a of rule r.
  using Alternative = std::vector<Element>;
  const std::vector<std::vector<Alternative>>& rules() const { return rules_; }
  int32_t root() const { return root_; }
  const std::string& rule_name(int32_t r) const { return names_[static_cast<size_t>(r)]; }
  // Whether rule r is a Kleene star in shape (`r ::= x... r | ()`, as every
  // `*` and `{m,}` compiles): its language L has L L = L, so a stack that
  // waits for r twice in a row waits for it once.
  bool is_star(int32_t r) const { return star_[static_cast<size_t>(r)] != 0; }

 private:
  Grammar() = default;
  friend class GrammarCompiler;
  std::vector<std::vector<Alternative>> rules_;
  std::vector<std::string> names_;
  std::vector<uint8_t> star_;
  int32_t root_ = -1;
};

// Where one sequence is in its grammar: a sorted set of stack ids (each
// stack's top a byte range, or -1: the input may end here), over an arena of
// interned stack nodes that this matcher owns (so sequences never share
// mutable state; a copy is an independent matcher).
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
  const std::vector<int32_t>& stacks() const { return stacks_; }
  const Grammar& grammar() const { return *g_; }

  // The stacks after `byte` from `stacks` (sorted, unique; empty: refused).
  void step(const std::vector<int32_t>& stacks, uint8_t byte, std::vector<int32_t>& out);

  // A stack node: (rule, alternative, element index of what comes next,
  // parent node); -1 is the empty stack.
  struct Node {
    int32_t rule, alt, pos, parent;
    bool operator==(const Node&) const = default;
  };
  size_t arena_size() const { return nodes_.size(); }

 private:
  int32_t intern(const Node& n);
  // intern(), with `r r` folded to `r` for a star rule r: the node whose
  // rest is exactly r, over a parent whose rest is exactly r too, is the
  // parent. Without this, nested stars (`root ::= . root*`) stack one more
  // pending r per byte: stacks and time grew with the square of the text.
  int32_t node_at(const Node& n);
  // Adds the stacks `id` expands to (rule references on top replaced by
  // their alternatives) to `out`.
  void expand(int32_t id, std::vector<int32_t>& out);

  std::shared_ptr<const Grammar> g_;
  struct NodeHash {
    size_t operator()(const Node& n) const;
  };
  std::vector<Node> nodes_;
  std::unordered_map<Node, int32_t, NodeHash> node_ids_;
  std::vector<int32_t> stacks_;
  std::vector<int32_t> scratch_, work_;
  // Nodes already expanded in this expand() call (seen_[id] == epoch_): a
  // cycle of tail references comes back to a node it has expanded.
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
};

// Whether `g` matches all of `text` (for tests and tools).
bool grammar_accepts(const std::shared_ptr<const Grammar>& g, std::string_view text);

}  // namespace pagellm
