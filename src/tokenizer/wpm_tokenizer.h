// WordPiece (tokenizer.ggml.model = "bert"), with the behaviour of Hugging
// Face's BertNormalizer + BertPreTokenizer + WordPiece for uncased BERT
// vocabularies:
//
//  1. Normalize, per character: drop U+0000, U+FFFD and other control
//     characters (general category C*, except \t \n \r); whitespace becomes a
//     space; CJK ideographs get a space on either side; the rest is decomposed
//     (NFD), nonspacing marks (accents) are dropped, and it is lowercased.
//  2. Cut into words at spaces; every punctuation character (ASCII punctuation
//     and symbols, or Unicode P*) is a word of its own.
//  3. Each word is covered greedily by the longest vocabulary pieces, left to
//     right. A word of more than 100 characters, or one that cannot be covered,
//     becomes the UNK token.
//
// In GGUF files the pieces are spelled as llama.cpp's converter writes them: a
// word-initial piece with a "▁" (U+2581) in front ("▁hello"), a continuation
// as is ("ing", Hugging Face's "##ing").
//
// add_special puts CLS (the BOS id) in front and SEP at the end. Pieces render
// as SentencePiece ones do ("▁" becomes a space; CONTROL tokens such as [CLS]
// render only when `special`).
#pragma once

#include "tokenizer/tokenizer.h"

namespace pagellm {

class WpmTokenizer final : public Tokenizer {
 public:
  explicit WpmTokenizer(Vocab vocab);

  std::string token_to_piece(int32_t id, bool special = false) const override;

  // Words longer than this (in characters) become UNK, as in Hugging Face.
  static constexpr size_t kMaxWordChars = 100;

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>& out) const override;

 private:
  void encode_word(const std::u32string& word, std::vector<int32_t>& out) const;
};

}  // namespace pagellm
