#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

std::string sanitize(std::string_view s) {
  std::string out;
  utf8_append_sanitized(s, out);
  return out;
}

TEST(Utf8, LeadLength) {
  EXPECT_EQ(utf8_lead_length('a'), 1u);
  EXPECT_EQ(utf8_lead_length(0x80), 1u);  // continuation bytes stand alone
  EXPECT_EQ(utf8_lead_length(0xC3), 2u);
  EXPECT_EQ(utf8_lead_length(0xE2), 3u);
  EXPECT_EQ(utf8_lead_length(0xF0), 4u);
  EXPECT_EQ(utf8_lead_length(0xFF), 4u);
}

TEST(Utf8, Scan) {
  using K = Utf8Scan::Kind;
  auto scan = [](std::string_view s) { return utf8_scan(s); };
  EXPECT_EQ(scan("a").kind, K::kValid);
  EXPECT_EQ(scan("\xC3\xA9").length, 2u);
  EXPECT_EQ(scan("\xF0\x9F\x99\x82").length, 4u);
  EXPECT_EQ(scan("\xF0\x9F").kind, K::kIncomplete);
  EXPECT_EQ(scan("\xF0\x9F").length, 2u);
  EXPECT_EQ(scan("\x80").kind, K::kInvalid);
  EXPECT_EQ(scan("\xC0\x80").kind, K::kInvalid);          // overlong
  EXPECT_EQ(scan("\xE0\x80\x80").kind, K::kInvalid);      // overlong
  EXPECT_EQ(scan("\xED\xA0\x80").kind, K::kInvalid);      // surrogate
  EXPECT_EQ(scan("\xF4\x90\x80\x80").kind, K::kInvalid);  // above U+10FFFF
  EXPECT_EQ(scan("\xE2\x82"
                 "a")
                .length,
            2u);  // maximal subpart E2 82
}

TEST(Utf8, Sanitize) {
  const std::string r(kUtf8Replacement);
  EXPECT_EQ(sanitize("héllo 🙂"), "héllo 🙂");
  EXPECT_EQ(sanitize("a\x80z"), "a" + r + "z");
  EXPECT_EQ(sanitize("a\xE2\x82z"), "a" + r + "z");
  EXPECT_EQ(sanitize("a\xF0\x9F"), "a" + r);
  EXPECT_EQ(sanitize("\xFF\xFE"), r + r);
  EXPECT_TRUE(utf8_is_valid("日本語"));
  EXPECT_FALSE(utf8_is_valid("\xC3"));
}

}  // namespace
}  // namespace pagellm
