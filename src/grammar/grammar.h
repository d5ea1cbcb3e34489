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
// Matching is GrammarMatcher (grammar_matcher.h).
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
  // to 10,000. Texts are those of the rule `start`.
  static std::shared_ptr<const Grammar> parse(std::string_view text,
                                              std::string_view start = "root");

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

}  // namespace pagellm
