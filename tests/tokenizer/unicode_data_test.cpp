#include "util/unicode_data.h"

#include <gtest/gtest.h>

#include "tokenizer/utf8.h"

namespace pagellm {
namespace {

std::u32string nfd(char32_t c) {
  std::u32string out;
  append_nfd(c, out);
  return out;
}

std::u32string lower(char32_t c) {
  std::u32string out;
  append_lower(c, out);
  return out;
}

TEST(UnicodeData, CharClass) {
  EXPECT_EQ(char_class(U' '), CharClass::kWhitespace);
  EXPECT_EQ(char_class(U'\t'), CharClass::kWhitespace);  // not control
  EXPECT_EQ(char_class(U'\n'), CharClass::kWhitespace);
  EXPECT_EQ(char_class(0x3000), CharClass::kWhitespace);
  EXPECT_EQ(char_class(0x00A0), CharClass::kWhitespace);
  EXPECT_EQ(char_class(0x0000), CharClass::kControl);
  EXPECT_EQ(char_class(0x200D), CharClass::kControl);  // ZERO WIDTH JOINER, Cf
  EXPECT_EQ(char_class(0xE000), CharClass::kControl);  // private use, Co
  EXPECT_EQ(char_class(0x0378), CharClass::kControl);  // unassigned, Cn
  EXPECT_EQ(char_class(0x0301), CharClass::kNonspacingMark);
  EXPECT_EQ(char_class(0xFE0F), CharClass::kNonspacingMark);  // VARIATION SELECTOR-16
  EXPECT_EQ(char_class(U'!'), CharClass::kPunctuation);
  EXPECT_EQ(char_class(0x3002), CharClass::kPunctuation);  // 。
  EXPECT_EQ(char_class(U'$'), CharClass::kOther);          // a symbol, Sc
  EXPECT_EQ(char_class(U'a'), CharClass::kOther);
  EXPECT_EQ(char_class(0x1F680), CharClass::kOther);  // 🚀
  EXPECT_EQ(char_class(0x10FFFF), CharClass::kControl);
}

TEST(UnicodeData, CanonicalDecomposition) {
  EXPECT_EQ(nfd(U'a'), U"a");
  EXPECT_EQ(nfd(0x00E9), (std::u32string{U'e', 0x0301}));                    // é
  EXPECT_EQ(nfd(0x1F82), (std::u32string{0x03B1, 0x0313, 0x0300, 0x0345}));  // ᾂ, nested
  EXPECT_EQ(nfd(0x212B), (std::u32string{U'A', 0x030A}));                    // ANGSTROM SIGN
  EXPECT_EQ(nfd(0x1EED), (std::u32string{U'u', 0x031B, 0x0309}));            // ử
  EXPECT_EQ(nfd(0xAC00), (std::u32string{0x1100, 0x1161}));                  // 가
  EXPECT_EQ(nfd(0xAC01), (std::u32string{0x1100, 0x1161, 0x11A8}));          // 각
  EXPECT_EQ(nfd(0x00BD), (std::u32string{0x00BD}));  // ½: compatibility only, kept
}

TEST(UnicodeData, Lowercase) {
  EXPECT_EQ(lower(U'A'), U"a");
  EXPECT_EQ(lower(U'a'), U"a");
  EXPECT_EQ(lower(0x0100), (std::u32string{0x0101}));  // Ā
  EXPECT_EQ(lower(0x0101), (std::u32string{0x0101}));
  EXPECT_EQ(lower(0x0178), (std::u32string{0x00FF}));  // Ÿ -> ÿ
  EXPECT_EQ(lower(0x03A3), (std::u32string{0x03C3}));  // Σ
  EXPECT_EQ(lower(0x0411), (std::u32string{0x0431}));  // Б
  EXPECT_EQ(lower(0x10400), (std::u32string{0x10428}));
  EXPECT_EQ(lower(0x0130), (std::u32string{U'i', 0x0307}));  // İ, the one longer mapping
  EXPECT_EQ(lower(0x1F680), (std::u32string{0x1F680}));
}

TEST(Utf8, DecodeAndAppend) {
  const std::string s = "a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x99\x82";
  EXPECT_EQ(utf8_decode(s), (std::u32string{U'a', 0xE9, 0x65E5, 0x1F642}));
  std::string back;
  for (char32_t c : utf8_decode(s)) utf8_append(c, back);
  EXPECT_EQ(back, s);
  // Each byte of an ill-formed part is one U+FFFD.
  EXPECT_EQ(utf8_decode("\xE2\x82x\xFF"), (std::u32string{0xFFFD, 0xFFFD, U'x', 0xFFFD}));
}

}  // namespace
}  // namespace pagellm
