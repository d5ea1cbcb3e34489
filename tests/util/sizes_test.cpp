#include "util/sizes.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace pagellm {

TEST(Sizes, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_size("4GiB"), 4ull << 30);
  EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("512m"), 512ull << 20);
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size("2GB"), 2000000000ull);
  EXPECT_EQ(parse_size("1000"), 1000ull);
  EXPECT_EQ(parse_size("7 B"), 7ull);
}

TEST(Sizes, RejectsGarbage) {
  EXPECT_THROW(parse_size(""), ConfigError);
  EXPECT_THROW(parse_size("GiB"), ConfigError);
  EXPECT_THROW(parse_size("-1GiB"), ConfigError);
  EXPECT_THROW(parse_size("4 parsecs"), ConfigError);
  EXPECT_THROW(parse_size("1e30"), ConfigError);
}

TEST(Sizes, Formats) {
  EXPECT_EQ(format_size(17), "17 B");
  EXPECT_EQ(format_size(1536), "1.50 KiB");
  EXPECT_EQ(format_size(4ull << 30), "4.00 GiB");
}

}  // namespace pagellm
