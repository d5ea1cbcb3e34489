#include "tokenizer/tokenizer.h"

#include "gguf/gguf_reader.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/wpm_tokenizer.h"
#include "util/error.h"

namespace pagellm {

namespace {

// The whitespace an rstrip token swallows (C's isspace in the "C" locale).
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  return create(Vocab::from_gguf(file));
}

std::unique_ptr<Tokenizer> Tokenizer::create(Vocab vocab) {
  if (vocab.model() == "llama") return std::make_unique<SpmTokenizer>(std::move(vocab));
  if (vocab.model() == "gpt2") return std::make_unique<BpeTokenizer>(std::move(vocab));
  if (vocab.model() == "bert") return std::make_unique<WpmTokenizer>(std::move(vocab));
  throw ConfigError("tokenizer model '" + vocab.model() + "' is not supported yet");
}

std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text,
                                                          bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({kNoToken, text});
  std::vector<Fragment> next;
  for (int32_t id : vocab_.special_tokens()) {
    const TokenType type = vocab_.type(id);
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const std::string& special = vocab_.text(id);
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t pos; (pos = rest.find(special)) != std::string_view::npos;) {
        if (pos > 0) next.push_back({kNoToken, rest.substr(0, pos)});
        next.push_back({id, rest.substr(pos, special.size())});
        rest.remove_prefix(pos + special.size());
        if (vocab_.rstrip(id)) {
          while (!rest.empty() && is_ascii_space(rest.front())) rest.remove_prefix(1);
        }
      }
      if (!rest.empty()) next.push_back({kNoToken, rest});
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
  bool after_special = true;
  for (const Fragment& f : split_special(text, parse_special)) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_text(f.text, after_special, out);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
  if (add_special && vocab_.add_sep()) out.push_back(vocab_.sep());
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id, special);
  return out;
}

}  // namespace pagellm
