#include "tokenizer/byte_level.h"

#include <array>

namespace pagellm {

namespace {

struct Alphabet {
  // byte -> its code point, as UTF-8 (at most 2 bytes; length in `len`).
  std::array<std::array<char, 2>, 256> text;
  std::array<uint8_t, 256> len;
  // code point (< 0x144) -> byte + 1; 0 means not in the alphabet.
  std::array<uint16_t, 0x144> byte_of;

  Alphabet() : text{}, len{}, byte_of{} {
    uint32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next_extra++;
      byte_of[cp] = static_cast<uint16_t>(b + 1);
      if (cp < 0x80) {
        text[b][0] = static_cast<char>(cp);
        len[b] = 1;
      } else {
        text[b][0] = static_cast<char>(0xC0 | (cp >> 6));
        text[b][1] = static_cast<char>(0x80 | (cp & 0x3F));
        len[b] = 2;
      }
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string_view byte_level_char(uint8_t byte) {
  const Alphabet& a = alphabet();
  return std::string_view(a.text[byte].data(), a.len[byte]);
}

std::string byte_level_encode(std::string_view bytes) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    out.append(a.text[b].data(), a.len[b]);
  }
  return out;
}

std::string byte_level_decode(std::string_view text) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c0 = static_cast<uint8_t>(text[i]);
    uint32_t cp = 0x110000;  // none
    size_t n = 1;
    if (c0 < 0x80) {
      cp = c0;
    } else if (c0 >= 0xC2 && c0 <= 0xDF && i + 1 < text.size() &&
               (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80) {
      cp = ((c0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      n = 2;
    }
    // Only 1- and 2-byte characters can be in the alphabet (all are < U+0144).
    if (cp < a.byte_of.size() && a.byte_of[cp] != 0) {
      out.push_back(static_cast<char>(a.byte_of[cp] - 1));
    } else {
      out.append(text, i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace pagellm
