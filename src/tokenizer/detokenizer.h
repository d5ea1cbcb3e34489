// Ids back to text.
//
// A token's piece (llama.cpp's token_to_piece for SPM vocabularies):
//   NORMAL        its text with every U+2581 turned into a space
//   BYTE          the one byte it stands for ("<0x0A>" -> "\n")
//   USER_DEFINED  its text as is
//   CONTROL, UNKNOWN  nothing, or their text when `special`
//   UNUSED, UNDEFINED nothing
// Pieces are bytes, not characters: a character may be spread over several
// BYTE tokens. StreamingDetokenizer turns a stream of ids into text that only
// ever holds whole, well-formed UTF-8 characters.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace pagellm {

// The SPM rendering above. Throws std::out_of_range for an id outside the vocabulary.
std::string spm_token_to_piece(const Vocab& vocab, int32_t id, bool special);

// Feeds ids one at a time, returns the text that became complete. Bytes of a
// character cut across tokens are held back until the character is whole. A
// byte sequence that cannot become well-formed UTF-8 is emitted as U+FFFD as
// soon as that is known (one U+FFFD per maximal ill-formed subpart), so at
// most 3 bytes are ever held back. For well-formed output the concatenation
// of everything returned (flush included) equals Tokenizer::decode.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool special = false)
      : tokenizer_(tokenizer), special_(special) {}

  // The text completed by `id` (possibly empty).
  std::string push(int32_t id);
  // The text held back, with a truncated character rendered as U+FFFD; resets.
  std::string flush();
  // Bytes currently held back.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool special_;
  std::string pending_;
};

}  // namespace pagellm
