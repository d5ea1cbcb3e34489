// Classes of vocabulary tokens by the bytes they are made of, so that a mask
// walk can set a whole class at once: where a grammar state takes every
// string of a class's bytes up to the class's longest token (inside a JSON
// string, a free-text rule like [^"\\]*, a number's digits, but not near a
// maxLength's end), every token of the class is allowed, and the trie walk
// need not visit them. A token belongs to every class whose byte set holds
// all of its bytes; a trie node's walk mask records, for each set of classes
// a state may admit, whether a token below it is in none of them (so still
// walked).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace pagellm {

// The classes, by index: JSON string body without escapes (printable ASCII
// but '"' and '\\'), ASCII digits, JSON whitespace (space, \t, \n, \r),
// printable ASCII (free text such as [^\n]*). ASCII only: a class must be
// closed under any order of its bytes, and UTF-8 is not (a continuation
// byte alone is refused).
constexpr int kTokenClasses = 4;
using ClassSet = uint8_t;  // bit c: class c
// The bytes of class c, ascending.
const std::vector<uint8_t>& token_class_bytes(int c);

class TokenClasses {
 public:
  // `tokens`: each token's bytes; `token_node[id]`: the trie node the token
  // ends at (-1: not in the trie, as empty and end-of-generation tokens, so
  // in no class); `node_parent[n]`: node n's parent (numbered before it).
  // Sets `walk_masks` to each node's walk mask (kept by the trie's edges,
  // where the walk reads them anyway).
  TokenClasses() = default;
  TokenClasses(const std::vector<std::string>& tokens, const std::vector<int32_t>& token_node,
               const std::vector<int32_t>& node_parent, std::vector<uint16_t>& walk_masks);

  // Token mask words of class c's members.
  const std::vector<uint64_t>& members(int c) const { return members_[static_cast<size_t>(c)]; }
  // The length in bytes of class c's longest token (0: none).
  size_t max_length(int c) const { return max_length_[static_cast<size_t>(c)]; }
  // Whether a token at or below the node of `walk_mask` is in none of `admitted`.
  static bool walk_needed(uint16_t walk_mask, ClassSet admitted) {
    return (walk_mask >> admitted) & 1;
  }

 private:
  std::array<std::vector<uint64_t>, kTokenClasses> members_;
  std::array<size_t, kTokenClasses> max_length_{};
  static_assert(kTokenClasses <= 4, "a walk mask holds a bit per set of classes");
};

}  // namespace pagellm
