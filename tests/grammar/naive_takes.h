// The grammar tests' naive reference for a token mask: whether a matcher's
// state takes all of a token's bytes, stepped byte by byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar_matcher.h"

namespace pagellm {

// Whether `m` can consume all of `bytes` from its current state (state
// unchanged); an empty token is never taken.
inline bool takes(GrammarMatcher& m, const std::string& bytes) {
  if (bytes.empty()) return false;
  std::vector<int32_t> cur = m.stacks(), next;
  for (unsigned char b : bytes) {
    m.step(cur, b, next);
    if (next.empty()) return false;
    cur.swap(next);
  }
  return true;
}

}  // namespace pagellm
