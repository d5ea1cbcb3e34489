// A tokenizer vocabulary, read from the `tokenizer.ggml.*` metadata of a GGUF file.
//
// Keys (all optional unless marked):
//   tokenizer.ggml.model          string, required: "llama" (SentencePiece-style),
//                                 "gpt2" (byte-level BPE), "bert" (WordPiece), ...
//   tokenizer.ggml.pre            string: the pre-tokenizer name of BPE vocabs
//   tokenizer.ggml.tokens         string array, required: the token texts, id = index
//   tokenizer.ggml.scores         f32 array, one per token (default 0): SPM merge priority
//   tokenizer.ggml.token_type     i32 array, one per token (default NORMAL):
//                                 0 UNDEFINED, 1 NORMAL, 2 UNKNOWN, 3 CONTROL,
//                                 4 USER_DEFINED, 5 UNUSED, 6 BYTE
//   tokenizer.ggml.merges         string array: BPE merges "left right", rank = index
//   tokenizer.ggml.bos_token_id, eos_token_id, unknown_token_id, seperator_token_id
//   (sic), padding_token_id, eot_token_id, eom_token_id
//                                 integer ids; 0xFFFFFFFF (or -1) means "none"
//   tokenizer.ggml.cls_token_id   integer: used as BOS when bos_token_id is absent
//   tokenizer.ggml.add_bos_token, add_eos_token, add_sep_token, add_space_prefix   bool
//   tokenizer.ggml.fim_pre_token_id, fim_suf_token_id, fim_mid_token_id, fim_pad_token_id,
//   fim_rep_token_id, fim_sep_token_id   integer: fill-in-the-middle tokens (older files:
//                                 prefix_token_id, suffix_token_id, middle_token_id).
//                                 Absent keys are looked up by text as llama.cpp does
//                                 ("<|fim_prefix|>", "<fim_prefix>", "<PRE>", ...).
//
// Defaults follow llama.cpp: for "llama" BOS 1, EOS 2, UNK 0, add_bos true,
// add_space_prefix true; for "gpt2" BOS = EOS = 11, no UNK, add_bos false,
// add_space_prefix false, except that the "llama3"-style, "tekken" and
// "chameleon" pre-tokenizers add BOS; for "bert" BOS (= CLS) 101, SEP 102,
// UNK 100, add_bos and add_sep true (CLS ... SEP). An empty token text becomes "[EMPTY_<id>]". When
// two tokens share a text, look-up by text finds the later id.
//
// Phi-3's SentencePiece vocabulary marks its added tokens "rstrip" upstream,
// which GGUF does not carry: for architecture "phi3" (or a name containing
// "phi-3"/"phi3") with a "llama" vocab, every CONTROL/USER_DEFINED token but
// <unk>, <s> and <|endoftext|> swallows the whitespace after it, as the
// reference tokenizers do.
//
// Validation (FormatError naming the key): array element types, scores and
// token_type lengths equal to the token count, token types in 0..6, special ids
// in range, and (for "llama") BYTE tokens spelled "<0xXX>".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pagellm {

class GgufFile;

// "No such token" for special ids and look-ups.
inline constexpr int32_t kNoToken = -1;

enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

const char* token_type_name(TokenType t);

class Vocab {
 public:
  // Everything a vocabulary is made of, as read from the file. Optional fields
  // left empty take the model's default (see above); an empty `scores` or
  // `types` means 0 / NORMAL for every token.
  struct Spec {
    std::string model = "llama";
    std::string pre;
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<TokenType> types;
    std::vector<std::string> merges;
    // nullopt: the model's default; kNoToken: none.
    std::optional<int32_t> bos, eos, unk, sep, pad, eot, eom;
    // Fill-in-the-middle; nullopt: found by text (see above).
    std::optional<int32_t> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    std::optional<bool> add_bos, add_eos, add_sep, add_space_prefix;
    // Tokens matched in input text that swallow the whitespace after them
    // (GGUF cannot say this; see from_gguf).
    std::vector<int32_t> rstrip;
  };

  // Validates; `source` (a file name) prefixes error messages. Throws FormatError.
  explicit Vocab(Spec spec, const std::string& source = "vocab");

  // Reads the tokenizer keys of `file`. Throws FormatError naming the key.
  static Vocab from_gguf(const GgufFile& file);

  const std::string& model() const { return model_; }
  const std::string& pre() const { return pre_; }
  // Something a user should know about the vocabulary ("" when nothing):
  // a BPE file that names no pre-tokenizer gets the reference's default.
  const std::string& warning() const { return warning_; }
  int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  bool contains(int32_t id) const { return id >= 0 && id < n_tokens(); }

  // Per-token data; `id` must be in range (checked, throws std::out_of_range).
  const std::string& text(int32_t id) const { return tokens_.at(id); }
  float score(int32_t id) const { return scores_.at(id); }
  TokenType type(int32_t id) const { return types_.at(id); }

  // The id whose text is exactly `text`, or kNoToken.
  int32_t find(std::string_view text) const;
  // The "<0xXX>" token for a byte, or kNoToken. Uppercase hex, as SPM spells it.
  int32_t byte_token(uint8_t byte) const;
  // The byte a BYTE token stands for ("<0xXX>" -> 0xXX); -1 when `id` is not one.
  int byte_value(int32_t id) const;
  // The piece of a token that is neither NORMAL nor BYTE (those depend on the
  // algorithm): USER_DEFINED as written, CONTROL and UNKNOWN as written when
  // `special`, else nothing.
  std::string verbatim_piece(int32_t id, bool special) const;

  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t unk() const { return unk_; }
  int32_t sep() const { return sep_; }
  int32_t pad() const { return pad_; }
  int32_t eot() const { return eot_; }
  int32_t eom() const { return eom_; }
  // Fill-in-the-middle tokens (kNoToken when the vocabulary has none).
  int32_t fim_pre() const { return fim_pre_; }
  int32_t fim_suf() const { return fim_suf_; }
  int32_t fim_mid() const { return fim_mid_; }
  int32_t fim_pad() const { return fim_pad_; }
  int32_t fim_rep() const { return fim_rep_; }
  int32_t fim_sep() const { return fim_sep_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // Append SEP when adding special tokens (BERT-style vocabularies).
  bool add_sep() const { return add_sep_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  const std::vector<std::string>& merges() const { return merges_; }

  // End of generation: EOS, EOT, EOM, and tokens spelled like a known
  // end-of-turn marker ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
  // "<|endoftext|>", "<|eom_id|>", "<EOT>"); those are also typed CONTROL.
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  // CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first (then by id):
  // the tokens that may be matched as whole strings in input text.
  const std::vector<int32_t>& special_tokens() const { return special_tokens_; }
  // Whether whitespace right after `id`, when matched in input text, is
  // dropped (as the upstream tokenizer's added-token "rstrip" flag does).
  bool rstrip(int32_t id) const { return contains(id) && rstrip_[id]; }

 private:
  std::string model_;
  std::string pre_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::vector<std::string> merges_;
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> by_text_;
  std::vector<int16_t> byte_values_;  // per token: 0..255 for BYTE tokens, -1 otherwise
  int32_t byte_tokens_[256];
  int32_t bos_ = kNoToken, eos_ = kNoToken, unk_ = kNoToken, sep_ = kNoToken, pad_ = kNoToken,
          eot_ = kNoToken, eom_ = kNoToken;
  int32_t fim_pre_ = kNoToken, fim_suf_ = kNoToken, fim_mid_ = kNoToken, fim_pad_ = kNoToken,
          fim_rep_ = kNoToken, fim_sep_ = kNoToken;
  std::string warning_;
  bool add_bos_ = false, add_eos_ = false, add_sep_ = false, add_space_prefix_ = false;
  std::vector<int32_t> eog_ids_;  // sorted
  std::vector<int32_t> special_tokens_;
  std::vector<bool> rstrip_;
};

}  // namespace pagellm
