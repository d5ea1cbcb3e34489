#include "tokenizer/detokenizer.h"

#include <string_view>

#include "tokenizer/utf8.h"

namespace pagellm {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

std::string unescape_spaces(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kSpace.size(), kSpace) == 0) {
      out.push_back(' ');
      i += kSpace.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

}  // namespace

std::string spm_token_to_piece(const Vocab& vocab, int32_t id, bool special) {
  const TokenType type = vocab.type(id);  // range-checked
  if (type == TokenType::kNormal) return unescape_spaces(vocab.text(id));
  if (type == TokenType::kByte) {
    const int b = vocab.byte_value(id);
    return b < 0 ? std::string() : std::string(1, static_cast<char>(b));
  }
  return vocab.verbatim_piece(id, special);
}

std::string StreamingDetokenizer::push(int32_t id) {
  pending_ += tokenizer_.token_to_piece(id, special_);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const Utf8Scan scan = utf8_scan(std::string_view(pending_).substr(i));
    if (scan.kind == Utf8Scan::Kind::kIncomplete) break;
    if (scan.kind == Utf8Scan::Kind::kValid)
      out.append(pending_, i, scan.length);
    else
      out.append(kUtf8Replacement);
    i += scan.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::string out;
  utf8_append_sanitized(pending_, out);
  pending_.clear();
  return out;
}

}  // namespace pagellm
