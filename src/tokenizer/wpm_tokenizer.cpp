#include "tokenizer/wpm_tokenizer.h"

#include "tokenizer/detokenizer.h"
#include "util/unicode_data.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_punctuation(char32_t c) {
  const bool ascii = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
                     (c >= 123 && c <= 126);
  return ascii || char_class(c) == CharClass::kPunctuation;
}

// Step 1 of the header.
std::u32string normalize(std::string_view text) {
  std::u32string out, nfd;
  out.reserve(text.size());
  for (char32_t c : utf8_decode(text)) {
    const CharClass cls = char_class(c);
    if (c == 0 || c == 0xFFFD || cls == CharClass::kControl) continue;
    if (cls == CharClass::kWhitespace) {
      out.push_back(U' ');
      continue;
    }
    if (is_cjk(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
      continue;
    }
    nfd.clear();
    append_nfd(c, nfd);
    for (char32_t d : nfd) {
      if (char_class(d) != CharClass::kNonspacingMark) append_lower(d, out);
    }
  }
  return out;
}

}  // namespace

WpmTokenizer::WpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {
  if (vocab_.unk() == kNoToken) {
    throw FormatError("WordPiece vocabulary has no UNK token (tokenizer.ggml.unknown_token_id)");
  }
}

void WpmTokenizer::encode_text(std::string_view text, bool /*after_special*/,
                               std::vector<int32_t>& out) const {
  const std::u32string norm = normalize(text);
  std::u32string word;
  for (char32_t c : norm) {
    if (c == U' ' || is_punctuation(c)) {
      if (!word.empty()) encode_word(word, out);
      word.clear();
      if (c != U' ') encode_word(std::u32string(1, c), out);
    } else {
      word.push_back(c);
    }
  }
  if (!word.empty()) encode_word(word, out);
}

void WpmTokenizer::encode_word(const std::u32string& word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordChars) {
    out.push_back(vocab_.unk());
    return;
  }
  // "▁" + the word in UTF-8, and where each character starts in it.
  std::string utf8(kWordStart);
  std::vector<size_t> starts;
  for (char32_t c : word) {
    starts.push_back(utf8.size());
    utf8_append(c, utf8);
  }
  starts.push_back(utf8.size());
  const size_t first_size = out.size();
  const std::string_view all(utf8);
  for (size_t begin = 0; begin < word.size();) {
    int32_t id = kNoToken;
    size_t end = word.size();
    // The first piece keeps its "▁".
    const size_t from = begin == 0 ? 0 : starts[begin];
    for (; end > begin; --end) {
      id = vocab_.find(all.substr(from, starts[end] - from));
      if (id != kNoToken) break;
    }
    if (id == kNoToken) {  // cannot be covered: the whole word is UNK
      out.resize(first_size);
      out.push_back(vocab_.unk());
      return;
    }
    out.push_back(id);
    begin = end;
  }
}

std::string WpmTokenizer::token_to_piece(int32_t id, bool special) const {
  return spm_token_to_piece(vocab_, id, special);
}

}  // namespace pagellm
