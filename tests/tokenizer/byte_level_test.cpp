#include "tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>

#include "tokenizer/utf8.h"

namespace pagellm {
namespace {

TEST(ByteLevel, AlphabetIsPrintableAndOneToOne) {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string c(byte_level_char(static_cast<uint8_t>(b)));
    EXPECT_TRUE(utf8_is_valid(c)) << b;
    EXPECT_TRUE(seen.insert(c).second) << "byte " << b << " shares its character";
    EXPECT_EQ(byte_level_decode(c), std::string(1, static_cast<char>(b))) << b;
  }
}

TEST(ByteLevel, KnownCharacters) {
  EXPECT_EQ(byte_level_char('a'), "a");
  EXPECT_EQ(byte_level_char('!'), "!");
  EXPECT_EQ(byte_level_char(0x00), "\xC4\x80");  // U+0100
  EXPECT_EQ(byte_level_char(' '), "\xC4\xA0");   // U+0120 "Ġ"
  EXPECT_EQ(byte_level_char('\n'), "\xC4\x8A");  // U+010A "Ċ"
  EXPECT_EQ(byte_level_char(0x7F), "\xC4\xA1");  // U+0121
  EXPECT_EQ(byte_level_char(0xA0), "\xC5\x82");  // U+0142
  EXPECT_EQ(byte_level_char(0xAD), "\xC5\x83");  // U+0143, the last one
  EXPECT_EQ(byte_level_char(0xE9), "\xC3\xA9");  // "é" stands for itself
}

TEST(ByteLevel, EncodeDecodeRoundTrip) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level_decode(byte_level_encode(all)), all);
  EXPECT_EQ(byte_level_encode(" hi\n"), "\xC4\xA0hi\xC4\x8A");
  // "é" (C3 A9) is two bytes, so two characters: "Ã" "©".
  EXPECT_EQ(byte_level_encode("\xC3\xA9"), "\xC3\x83\xC2\xA9");
}

TEST(ByteLevel, DecodeKeepsCharactersOutsideTheAlphabet) {
  EXPECT_EQ(byte_level_decode("\xE6\x97\xA5"), "\xE6\x97\xA5");  // "日"
  EXPECT_EQ(byte_level_decode("\xC5\x84"), "\xC5\x84");          // U+0144, just past
  EXPECT_EQ(byte_level_decode("a\xFF"
                              "b"),
            "a\xFF"
            "b");                                        // ill-formed byte
  EXPECT_EQ(byte_level_decode("\xC4"), "\xC4");          // truncated
  EXPECT_EQ(byte_level_decode("\xC1\x81"), "\xC1\x81");  // overlong 'A'
}

}  // namespace
}  // namespace pagellm
