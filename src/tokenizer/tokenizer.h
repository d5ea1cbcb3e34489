// The tokenizer facade: text <-> token ids for one vocabulary. The algorithm is
// chosen by `tokenizer.ggml.model` ("llama": SentencePiece-style, see
// spm_tokenizer.h; "gpt2": byte-level BPE, see bpe_tokenizer.h; "bert":
// WordPiece, see wpm_tokenizer.h); the rest is shared by all algorithms:
//
//  * encode() first cuts the text at special tokens (see split_special), then
//    hands each stretch of plain text to the algorithm, and adds BOS/EOS/SEP
//    when asked for `add_special` and the vocabulary says so (add_bos /
//    add_eos / add_sep).
//  * decode() concatenates token_to_piece() of each id (raw bytes; pieces may
//    hold partial UTF-8 characters, see StreamingDetokenizer for streaming).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagellm {

class GgufFile;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Reads the vocabulary of `file` and picks the algorithm. Throws FormatError
  // for bad metadata, ConfigError("tokenizer model 'X' is not supported yet")
  // for algorithms not implemented.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  static std::unique_ptr<Tokenizer> create(Vocab vocab);

  const Vocab& vocab() const { return vocab_; }
  int32_t n_vocab() const { return vocab_.n_tokens(); }
  int32_t bos_id() const { return vocab_.bos(); }
  int32_t eos_id() const { return vocab_.eos(); }
  bool is_eog(int32_t id) const { return vocab_.is_eog(id); }

  // Text -> ids. add_special: prepend BOS / append EOS, SEP where the vocabulary
  // asks for them. parse_special: also recognise the text of CONTROL and
  // UNKNOWN tokens (e.g. "<s>") in `text`; USER_DEFINED tokens are always
  // recognised. Empty text gives no text tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = false) const;

  // The bytes of one token. special=false renders CONTROL and UNKNOWN tokens
  // as nothing; special=true renders them as their text. Ids out of range
  // throw std::out_of_range.
  virtual std::string token_to_piece(int32_t id, bool special = false) const = 0;
  // Concatenated pieces.
  std::string decode(std::span<const int32_t> ids, bool special = false) const;

  // A stretch of input: plain text, or one special token found in it.
  struct Fragment {
    int32_t token = kNoToken;  // kNoToken: plain text
    std::string_view text;
  };
  // Cuts `text` at the special tokens of the vocabulary (see
  // Vocab::special_tokens; longer texts first); CONTROL/UNKNOWN ones only
  // when `parse_special`.
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;

 protected:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  // Appends the ids of one stretch of plain text (never empty).
  // `after_special`: it starts the input or follows a special token.
  virtual void encode_text(std::string_view text, bool after_special,
                           std::vector<int32_t>& out) const = 0;

  Vocab vocab_;
};

}  // namespace pagellm
