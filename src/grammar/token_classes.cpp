#include "grammar/token_classes.h"

#include <algorithm>

namespace pagellm {

namespace {

bool in_class(int c, uint8_t b) {
  const bool printable = b >= 0x20 && b <= 0x7e;
  switch (c) {
    case 0: return printable && b != '"' && b != '\\';
    case 1: return b >= '0' && b <= '9';
    case 2: return b == ' ' || b == '\t' || b == '\n' || b == '\r';
    default: return printable;
  }
}

}  // namespace

const std::vector<uint8_t>& token_class_bytes(int c) {
  static const auto table = [] {
    std::array<std::vector<uint8_t>, kTokenClasses> t;
    for (int k = 0; k < kTokenClasses; ++k)
      for (int b = 0; b < 256; ++b)
        if (in_class(k, static_cast<uint8_t>(b))) t[static_cast<size_t>(k)].push_back(static_cast<uint8_t>(b));
    return t;
  }();
  return table[static_cast<size_t>(c)];
}

TokenClasses::TokenClasses(const std::vector<std::string>& tokens,
                           const std::vector<int32_t>& token_node,
                           const std::vector<int32_t>& node_parent,
                           std::vector<uint16_t>& walk_masks) {
  // Bit a of a node's mask: some token at or below it is in no class of set a.
  walk_masks.assign(node_parent.size(), 0);
  for (auto& m : members_) m.assign((tokens.size() + 63) / 64, 0);
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (token_node[id] < 0) continue;
    ClassSet of = 0;
    for (int c = 0; c < kTokenClasses; ++c) {
      bool all = true;
      for (unsigned char b : tokens[id]) all = all && in_class(c, b);
      if (!all) continue;
      of |= static_cast<ClassSet>(1u << c);
      members_[static_cast<size_t>(c)][id >> 6] |= uint64_t{1} << (id & 63);
      max_length_[static_cast<size_t>(c)] = std::max(max_length_[static_cast<size_t>(c)], tokens[id].size());
    }
    // Walked under every set of admitted classes it has no class in.
    uint16_t needed = 0;
    for (unsigned a = 0; a < (1u << kTokenClasses); ++a)
      if ((a & of) == 0) needed |= static_cast<uint16_t>(1u << a);
    walk_masks[static_cast<size_t>(token_node[id])] |= needed;
  }
  // Children after their parents: one backward pass sums the subtrees.
  for (size_t n = node_parent.size(); n-- > 1;)
    walk_masks[static_cast<size_t>(node_parent[n])] |= walk_masks[n];
}

}  // namespace pagellm
