// SentencePiece-style tokenization (tokenizer.ggml.model = "llama"), with the
// behaviour of llama.cpp's SPM tokenizer:
//
//  1. If add_space_prefix and the text starts the input or follows a special
//     token, a space is put in front. Every space becomes U+2581 ("▁").
//  2. The text is cut into characters by the high bits of each lead byte (so
//     any byte string can be cut, ill-formed UTF-8 included).
//  3. Repeatedly, the adjacent pair with the highest score whose concatenation
//     is a vocabulary token is merged (ties: the leftmost pair).
//  4. Each final piece that is a token is emitted; any other piece falls back
//     to one token per byte: "<0xXX>", else the one-byte text, else UNK.
//
// Pieces render with "▁" turned back into spaces; BYTE tokens render as their byte.
#pragma once

#include "tokenizer/tokenizer.h"

namespace pagellm {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {}

  std::string token_to_piece(int32_t id, bool special = false) const override;

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>& out) const override;

 private:
  void emit_bytes(std::string_view piece, std::vector<int32_t>& out) const;
};

}  // namespace pagellm
