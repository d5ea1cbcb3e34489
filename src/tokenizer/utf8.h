// UTF-8 helpers shared by the tokenizers and detokenizers.
//
// Well-formed UTF-8 (RFC 3629, Unicode table 3-7):
//   00..7F                      one byte
//   C2..DF 80..BF               two bytes
//   E0 A0..BF 80..BF | E1..EC 80..BF 80..BF | ED 80..9F 80..BF | EE..EF 80..BF 80..BF
//   F0 90..BF 80..BF 80..BF | F1..F3 80..BF x3 | F4 80..8F 80..BF 80..BF
// Anything else (C0, C1, F5..FF, stray continuation bytes, surrogates,
// truncated sequences) is ill-formed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/strings.h"  // utf8_append

namespace pagellm {

// U+FFFD REPLACEMENT CHARACTER, as UTF-8.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

// Length of the character that starts with `lead`, judged from its high four
// bits only (1 for ASCII and for continuation bytes, 2 for C0..DF, 3 for
// E0..EF, 4 for F0..FF). This is how SentencePiece-style tokenizers cut text
// into characters; it never returns 0, so any byte string can be split.
size_t utf8_lead_length(uint8_t lead);

// Result of looking at the well-formed character (if any) at the start of `s`.
struct Utf8Scan {
  enum class Kind {
    kValid,       // `length` bytes form one well-formed character
    kIncomplete,  // a well-formed prefix of a character that `s` cuts short
    kInvalid,     // `length` bytes (>= 1) are a maximal ill-formed subpart
  };
  Kind kind;
  size_t length;
};
// `s` must not be empty.
Utf8Scan utf8_scan(std::string_view s);

// Appends `s` to `out`, replacing each maximal ill-formed subpart (and a
// truncated sequence at the end) by U+FFFD.
void utf8_append_sanitized(std::string_view s, std::string& out);

// True when `s` is entirely well-formed UTF-8.
bool utf8_is_valid(std::string_view s);

// The code points of `s`; each byte of an ill-formed part becomes U+FFFD.
std::u32string utf8_decode(std::string_view s);

}  // namespace pagellm
