#include "util/strings.h"

#include <gtest/gtest.h>

#include <string>

namespace pagellm {
namespace {

// The escapes JSON (RFC 8259 section 7) and C give these three by name; no
// other character has one here (each writer escapes the rest its own way).
TEST(Strings, WhitespaceEscapeNamesOnlyNewlineReturnAndTab) {
  for (char32_t c = 0; c < 0x110; ++c) {
    const std::string_view e = whitespace_escape(c);
    std::string want;
    if (c == 0x0A) want = std::string(1, '\\') + 'n';
    if (c == 0x0D) want = std::string(1, '\\') + 'r';
    if (c == 0x09) want = std::string(1, '\\') + 't';
    EXPECT_EQ(std::string(e), want) << static_cast<uint32_t>(c);
  }
  EXPECT_TRUE(whitespace_escape(U'\u2028').empty());
}

TEST(Strings, TrimDropsSurroundingWhiteSpaceOnly) {
  EXPECT_EQ(trim(" \t a b \n"), "a b");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim(" \r\n"), "");
}

}  // namespace
}  // namespace pagellm
