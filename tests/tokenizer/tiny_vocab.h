// A small hand-made SPM vocabulary for tokenizer unit tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagellm::test {

// Ids: 0 <unk> (UNKNOWN), 1 <s>, 2 </s> (CONTROL), 3..258 <0x00>..<0xFF> (BYTE,
// when `with_bytes`), then `pieces` (NORMAL) in order, with their scores.
inline Vocab::Spec tiny_spec(const std::vector<std::pair<std::string, float>>& pieces,
                             bool with_bytes = true) {
  Vocab::Spec s;
  s.model = "llama";
  auto add = [&](std::string text, float score, TokenType type) {
    s.tokens.push_back(std::move(text));
    s.scores.push_back(score);
    s.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  if (with_bytes) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      add(std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'}, 0, TokenType::kByte);
    }
  }
  for (const auto& [text, score] : pieces) add(text, score, TokenType::kNormal);
  return s;
}

}  // namespace pagellm::test
