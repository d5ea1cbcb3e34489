#include "tokenizer/utf8.h"

namespace pagellm {

size_t utf8_lead_length(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

namespace {

// Number of bytes of the sequence that `lead` opens, 0 when `lead` cannot start one.
size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Allowed range of the byte right after `lead` (the later ones are always 80..BF).
void second_byte_range(uint8_t lead, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead == 0xE0)
    lo = 0xA0;  // no overlong 3-byte forms
  else if (lead == 0xED)
    hi = 0x9F;  // no surrogates
  else if (lead == 0xF0)
    lo = 0x90;  // no overlong 4-byte forms
  else if (lead == 0xF4)
    hi = 0x8F;  // nothing above U+10FFFF
}

}  // namespace

Utf8Scan utf8_scan(std::string_view s) {
  const auto lead = static_cast<uint8_t>(s[0]);
  const size_t need = sequence_length(lead);
  if (need == 0) return {Utf8Scan::Kind::kInvalid, 1};
  if (need == 1) return {Utf8Scan::Kind::kValid, 1};
  for (size_t i = 1; i < need; ++i) {
    if (i >= s.size()) return {Utf8Scan::Kind::kIncomplete, i};
    const auto b = static_cast<uint8_t>(s[i]);
    uint8_t lo = 0x80, hi = 0xBF;
    if (i == 1) second_byte_range(lead, lo, hi);
    if (b < lo || b > hi) return {Utf8Scan::Kind::kInvalid, i};
  }
  return {Utf8Scan::Kind::kValid, need};
}

void utf8_append_sanitized(std::string_view s, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Scan scan = utf8_scan(s.substr(i));
    if (scan.kind == Utf8Scan::Kind::kValid) {
      out.append(s.substr(i, scan.length));
    } else {
      out.append(kUtf8Replacement);
    }
    i += scan.length;
  }
}

bool utf8_is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Scan scan = utf8_scan(s.substr(i));
    if (scan.kind != Utf8Scan::Kind::kValid) return false;
    i += scan.length;
  }
  return true;
}

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Scan scan = utf8_scan(s.substr(i));
    if (scan.kind != Utf8Scan::Kind::kValid) {
      out.append(scan.length, U'\uFFFD');
    } else {
      const auto b0 = static_cast<uint8_t>(s[i]);
      char32_t cp = scan.length == 1   ? b0
                    : scan.length == 2 ? b0 & 0x1F
                    : scan.length == 3 ? b0 & 0x0F
                                       : b0 & 0x07;
      for (size_t k = 1; k < scan.length; ++k)
        cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
      out.push_back(cp);
    }
    i += scan.length;
  }
  return out;
}

}  // namespace pagellm
