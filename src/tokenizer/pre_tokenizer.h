// Pre-tokenizers of byte-level BPE vocabularies: they cut text into words
// before BPE merges run inside each word. `tokenizer.ggml.pre` names one; each
// is a list of regular expressions (see unicode_regex.h for the dialect),
// applied in turn as llama.cpp and Hugging Face's Split(..., "isolated") do:
// the first regex cuts the text into its matches and the stretches between
// them, and each later regex cuts every piece of the previous pass the same
// way. Nothing is dropped: the words always concatenate to the text.
//
// Names (the regex lists are in pre_tokenizer.cpp):
//   gpt-2 style     contractions 's 't 're 've 'm 'll 'd, ` ?\p{L}+`, ` ?\p{N}+`,
//                   ` ?[^\s\p{L}\p{N}]+`, `\s+(?!\S)`:
//                   "gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe",
//                   "gigachat", "jina-*" (v1-en, v2-es, v2-de, v2-code, es, de),
//                   and "default" or no name (llama.cpp's legacy "default"
//                   list differs; real vocabs without a name, e.g. GPT-NeoX,
//                   are gpt-2 style)
//   digits apart    one word per digit, then gpt-2 style: "starcoder",
//                   "refact", "command-r", "smollm", "codeshell", "exaone",
//                   "minerva-7b"
//   llama3          case-insensitive contractions, letters with one leading
//                   non-letter, numbers in groups of 1-3 digits, punctuation
//                   runs with trailing newlines, newline runs, spaces:
//                   "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1"
//                   (these also skip merges for words that are whole tokens,
//                   and add BOS by default), "dbrx", "smaug-bpe", "chatglm-bpe"
//   qwen2           llama3 with one digit per word: "qwen2", "deepseek-r1-qwen",
//                   "stablelm2", "megrez"
//   deepseek-llm    newlines apart, cased-letter runs, ASCII/full-width
//                   punctuation runs, trailing spaces, CJK/Hangul runs, digit runs
//   deepseek-coder  newlines apart, letter runs, punctuation runs, CJK/Hangul
//                   runs, one digit per word
//   deepseek-v3     1-3 digit groups, CJK/kana runs, then a llama3-like split
//   falcon          punctuation runs, gpt-2 style, then 3-digit groups
//   bloom           runs of anything but spaces and . , ! ? … 。 ， 、 । ۔ ،:
//                   "bloom", "poro-chat", "gpt3-finnish"; "viking" also puts
//                   digits apart
//   tekken          Mistral's: words by letter case, one digit per word
//                   (skips merges for whole tokens, adds BOS by default)
//   chameleon       sentinel/image tokens, tabs/newlines/space runs, digits
//                   and punctuation apart, then gpt-2 style (adds BOS by default)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/unicode_regex.h"

namespace pagellm {

class PreTokenizer {
 public:
  // Throws ConfigError("unknown BPE pre-tokenizer 'X'") for a name not above.
  static PreTokenizer for_name(std::string_view pre);
  // Every name for_name accepts ("" included).
  static std::vector<std::string> known_names();
  // Whether vocabularies with this pre-tokenizer add BOS when the GGUF has no
  // tokenizer.ggml.add_bos_token key (llama.cpp's default). Unknown: false.
  static bool adds_bos_by_default(std::string_view pre);

  // A pre-tokenizer from explicit regexes, applied in order.
  explicit PreTokenizer(const std::vector<std::string>& patterns, bool ignore_merges = false);

  // Whether BPE emits a word that is itself a token as that token, without
  // running merges (llama3, tekken).
  bool ignore_merges() const { return ignore_merges_; }

  // Cuts `text` (well-formed UTF-8, not checked) into words: views into
  // `text`, in order, none empty, concatenating to `text`.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  std::vector<UnicodeRegex> regexes_;
  bool ignore_merges_ = false;
};

}  // namespace pagellm
