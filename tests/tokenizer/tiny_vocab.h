// A small hand-made SPM vocabulary for tokenizer unit tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"
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

// A small byte-level BPE vocabulary: ids 0..255 are the byte-level characters
// of bytes 0..255 (NORMAL), then one NORMAL token per merge (left + right, in
// merge order), then `<|endoftext|>` (CONTROL, BOS = EOS). Merges are given as
// raw byte strings and written in the byte-level alphabet ("a b", " a" -> "Ġ a").
inline Vocab::Spec tiny_bpe_spec(const std::vector<std::pair<std::string, std::string>>& merges,
                                 const std::string& pre = "gpt-2") {
  Vocab::Spec s;
  s.model = "gpt2";
  s.pre = pre;
  for (int b = 0; b < 256; ++b) {
    s.tokens.emplace_back(byte_level_char(static_cast<uint8_t>(b)));
    s.types.push_back(TokenType::kNormal);
  }
  for (const auto& [left, right] : merges) {
    const std::string l = byte_level_encode(left), r = byte_level_encode(right);
    s.merges.push_back(l + " " + r);
    s.tokens.push_back(l + r);
    s.types.push_back(TokenType::kNormal);
  }
  const auto eot = static_cast<int32_t>(s.tokens.size());
  s.tokens.emplace_back("<|endoftext|>");
  s.types.push_back(TokenType::kControl);
  s.bos = eot;
  s.eos = eot;
  return s;
}

}  // namespace pagellm::test
