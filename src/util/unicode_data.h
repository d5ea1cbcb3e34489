// Unicode character data for normalizing text the way BERT tokenizers do
// (wpm_tokenizer.h). The tables are generated from Python's unicodedata
// (Unicode 14.0) by scripts/gen_unicode_tables.py into unicode_tables.inc.
#pragma once

#include <cstdint>
#include <string>

namespace pagellm {

enum class CharClass : uint8_t {
  kOther = 0,
  kWhitespace = 1,      // the White_Space property (\t \n \v \f \r, space, U+3000, ...)
  kControl = 2,         // general category C*: Cc, Cf, Cs, Co, Cn (unassigned)
  kPunctuation = 3,     // general category P*
  kNonspacingMark = 4,  // general category Mn (accents once decomposed)
};

// The class of `cp`; whitespace wins over control (\t and \n are whitespace).
CharClass char_class(char32_t cp);

// Appends the canonical decomposition (NFD) of `cp`, or `cp` itself. Hangul
// syllables decompose into jamo. Combining marks are not put into canonical
// order (a BERT normalizer drops the nonspacing ones anyway).
void append_nfd(char32_t cp, std::u32string& out);

// Appends the lowercase mapping of `cp` (full mapping: U+0130 gives two code
// points), or `cp` itself.
void append_lower(char32_t cp, std::u32string& out);

}  // namespace pagellm
