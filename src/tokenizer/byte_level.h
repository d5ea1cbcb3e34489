// GPT-2's byte-level alphabet, used by byte-level BPE vocabularies
// (tokenizer.ggml.model = "gpt2"): every byte 0..255 is written as one
// printable code point, so that token texts never hold raw control bytes or
// spaces.
//
//   bytes 0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF  stand for the code point of the
//                                             same number ('a' is "a", 0xE9 is "é")
//   the other 68 bytes (0x00..0x20, 0x7F..0xA0, 0xAD), in increasing order,
//   stand for U+0100, U+0101, ... U+0143     (space 0x20 is "Ġ" U+0120,
//                                             "\n" 0x0A is "Ċ" U+010A)
//
// Token texts are UTF-8 strings over this alphabet; "Ġhello" is " hello".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagellm {

// The UTF-8 text (1 or 2 bytes) of the code point that stands for `byte`.
std::string_view byte_level_char(uint8_t byte);

// Each byte of `bytes` written as its code point.
std::string byte_level_encode(std::string_view bytes);

// The bytes a token text stands for. A code point outside the alphabet, and any
// ill-formed UTF-8, is kept as it is (its own UTF-8 bytes).
std::string byte_level_decode(std::string_view text);

}  // namespace pagellm
