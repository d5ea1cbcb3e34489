// YaRN's per-pair divisors against values worked out by hand from the
// formula (README of ../shared/golden/arch2026): gpt-oss's settings, n_rot 32,
// base 150000, original context 4096, betas 32 / 1: correction dims
// floor(4.046) = 4 and ceil(8.70) = 9.
#include <gtest/gtest.h>

#include <cmath>

#include "model/rope_yarn.h"

namespace pagellm {
namespace {

TEST(RopeYarn, DivisorsRampBetweenTheCorrectionDims) {
  const YarnSpec y{.factor = 32, .orig_ctx = 4096, .beta_fast = 32, .beta_slow = 1};
  const std::vector<float> d = yarn_freq_factors(y, 32, 150000.0f);
  ASSERT_EQ(d.size(), 16u);
  for (int i = 0; i <= 4; ++i) EXPECT_FLOAT_EQ(d[static_cast<size_t>(i)], 1.0f) << i;
  for (int i = 9; i < 16; ++i) EXPECT_FLOAT_EQ(d[static_cast<size_t>(i)], 32.0f) << i;
  // Pair 6: ramp 1 - (6 - 4) / 5 = 0.6; frequency times 0.6 + 0.4 / 32.
  EXPECT_FLOAT_EQ(d[6], static_cast<float>(1.0 / (0.6 + 0.4 / 32)));
  for (int i = 1; i < 16; ++i) EXPECT_GE(d[static_cast<size_t>(i)], d[static_cast<size_t>(i - 1)]);
}

TEST(RopeYarn, NoScalingWithoutAFactor) {
  for (float v : yarn_freq_factors(YarnSpec{}, 8, 10000.0f)) EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(yarn_magnitude(0), 1.0f);
  EXPECT_EQ(yarn_magnitude(1), 1.0f);
  EXPECT_NEAR(yarn_magnitude(32), 1.0 + 0.1 * std::log(32.0), 1e-6);
}

}  // namespace
}  // namespace pagellm
