// Byte-level BPE (tokenizer.ggml.model = "gpt2": GPT-2, Llama 3, Qwen2,
// DeepSeek, StarCoder, ...), with the behaviour of llama.cpp's BPE tokenizer:
//
//  1. Ill-formed UTF-8 in the text is replaced by U+FFFD, one per byte of each
//     maximal ill-formed subpart.
//  2. The pre-tokenizer named by tokenizer.ggml.pre cuts the text into words
//     (pre_tokenizer.h).
//  3. Each byte of a word becomes one symbol: the token whose text is that
//     byte's character in GPT-2's byte-level alphabet (byte_level.h). Where the
//     pre-tokenizer says so (llama3, tekken) a word that is a token as a whole
//     is emitted as that token, without merges.
//  4. Repeatedly, of all adjacent symbol pairs "left right" listed in
//     tokenizer.ggml.merges, the one listed first is merged (ties: the
//     leftmost pair). A heap of candidate pairs over a linked list of symbols
//     makes this O(n log n) in the word length.
//  5. Each final symbol is emitted as its token. A merge whose result is not a
//     token (only in broken vocabularies) falls back to the tokens of its bytes.
//
// Within one encode() call each distinct word is merged once; repeats copy its
// ids. Encoding is const and thread-safe.
//
// tokenizer.ggml.merges entries are "left right": the two token texts split at
// the first space after the first character. A pair listed twice keeps its
// first rank.
//
// Pieces (llama.cpp's token_to_piece for BPE vocabularies):
//   NORMAL            its text mapped back through the byte-level alphabet
//   USER_DEFINED      its text as is
//   CONTROL, UNKNOWN  nothing, or their text when `special`
//   other types       nothing
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

class BpeTokenizer final : public Tokenizer {
 public:
  // Throws FormatError for a malformed merge, ConfigError for an unknown
  // pre-tokenizer name.
  explicit BpeTokenizer(Vocab vocab);

  std::string token_to_piece(int32_t id, bool special = false) const override;

  const PreTokenizer& pre_tokenizer() const { return pre_; }

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>& out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // symbol id
  };
  struct Scratch;

  // Symbol ids: token ids, then ids >= n_vocab for texts that only merges know.
  int32_t symbol_id(const std::string& text, std::unordered_map<std::string, int32_t>& extra_ids);
  void encode_word(std::string_view word, Scratch& s, std::vector<int32_t>& out) const;
  void emit_bytes(std::string_view bytes, std::vector<int32_t>& out) const;
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  PreTokenizer pre_;
  int32_t n_extra_ = 0;
  int32_t byte_symbol_[256];
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace pagellm
