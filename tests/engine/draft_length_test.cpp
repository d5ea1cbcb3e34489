// Speculative decoding's draft lengths: the step cost table, the expected
// tokens of a draft, and the choice of lengths against a brute force over
// every combination.
#include "engine/draft_length.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace pagellm {
namespace {

TEST(ExpectedTokens, IsTheSumOfPowers) {
  for (double p : {0.0, 0.25, 0.5, 0.9, 1.0})
    for (int k = 0; k <= 8; ++k) {
      double want = 0;
      for (int j = 0; j <= k; ++j) want += std::pow(p, j);
      EXPECT_NEAR(expected_tokens(p, k), want, 1e-12) << "p " << p << " k " << k;
    }
}

// The objective of choose_draft_lengths, written out.
double value(const std::vector<double>& p, const std::vector<int32_t>& k, int64_t base,
             const std::vector<double>& cost) {
  double tokens = static_cast<double>(base);
  int64_t rows = base;
  for (size_t i = 0; i < p.size(); ++i) {
    tokens += expected_tokens(p[i], k[i]) - 1;
    rows += k[i];
  }
  return tokens / cost[static_cast<size_t>(rows)];
}

TEST(ChooseDraftLengths, EqualsBruteForce) {
  std::mt19937 rng(11);
  int drafted = 0, varied = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int n = std::uniform_int_distribution<int>(1, 3)(rng);
    const int64_t base = std::uniform_int_distribution<int>(n, n + 2)(rng);
    std::vector<double> p(static_cast<size_t>(n));
    std::vector<int32_t> caps(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const int kind = std::uniform_int_distribution<int>(0, 5)(rng);
      p[i] = kind == 0 ? 0.0 : kind == 1 ? 1.0 : std::uniform_real_distribution<double>(0, 1)(rng);
      caps[i] = std::uniform_int_distribution<int>(0, 4)(rng);
    }
    // Step costs: increasing with steps of random size, or any positive values.
    std::vector<double> cost(static_cast<size_t>(base + 13));
    const bool monotone = iter % 3 != 0;
    double c = 1;
    for (auto& x : cost) {
      x = monotone ? c : std::uniform_real_distribution<double>(0.5, 3)(rng);
      c += std::uniform_int_distribution<int>(0, 1)(rng) * std::uniform_real_distribution<double>(0, 0.6)(rng);
    }
    const auto got = choose_draft_lengths(p, caps, base, [&](int64_t r) { return cost[static_cast<size_t>(r)]; });
    ASSERT_EQ(got.size(), p.size());
    for (int i = 0; i < n; ++i) ASSERT_TRUE(got[i] >= 0 && got[i] <= caps[i]) << "iter " << iter;
    // Every combination.
    double best = -1;
    int64_t best_rows = 0;
    std::vector<int32_t> k(static_cast<size_t>(n), 0);
    for (;;) {
      const double v = value(p, k, base, cost);
      int64_t rows = 0;
      for (int x : k) rows += x;
      if (v > best * (1 + 1e-9)) {
        best = v;
        best_rows = rows;
      } else if (v >= best * (1 - 1e-9)) {
        best_rows = std::min(best_rows, rows);
      }
      int i = 0;
      while (i < n && k[i] == caps[i]) k[i++] = 0;
      if (i == n) break;
      ++k[i];
    }
    int64_t got_rows = 0;
    for (int x : got) got_rows += x;
    ASSERT_NEAR(value(p, got, base, cost), best, best * 1e-9) << "iter " << iter;
    ASSERT_LE(got_rows, best_rows) << "iter " << iter << ": more rows for the same value";
    drafted += got_rows > 0;
    varied += got_rows > 0 && got_rows < std::accumulate(caps.begin(), caps.end(), 0);
  }
  // The cases meant something: drafts chosen, and cut short of the caps.
  EXPECT_GT(drafted, 300);
  EXPECT_GT(varied, 300);
}

TEST(ChooseDraftLengths, NoRowsForDraftsThatCannotPay) {
  auto flat = [](int64_t) { return 1.0; };
  auto linear = [](int64_t r) { return static_cast<double>(r); };
  const std::vector<int32_t> caps = {8, 8};
  // Free rows: every draft token with a chance is worth its row; none without.
  EXPECT_EQ(choose_draft_lengths(std::vector<double>{0.5, 0.0}, caps, 2, flat),
            (std::vector<int32_t>{8, 0}));
  // Rows that cost a whole step each: a draft token gains at most one token
  // for one row's time, so none pays unless certain (and then it only ties).
  EXPECT_EQ(choose_draft_lengths(std::vector<double>{0.99, 0.9}, caps, 2, linear),
            (std::vector<int32_t>{0, 0}));
}

TEST(StepCostModel, FastestRecentStepPerRowCount) {
  StepCostModel m;
  std::mt19937 rng(3);
  std::vector<double> seen;
  for (int i = 0; i < 30; ++i) {
    const double t = std::uniform_real_distribution<double>(1, 2)(rng);
    m.record(4, t);
    seen.push_back(t);
    const auto from = seen.size() > StepCostModel::kWindow ? seen.end() - StepCostModel::kWindow : seen.begin();
    const double fastest = *std::min_element(from, seen.end());
    if (m.trusted(4))
      ASSERT_EQ(m.cost(4), fastest) << i;
    else  // too few: each missing step counts as the prior's guess (nothing else is measured)
      ASSERT_NEAR(m.cost(4),
                  (fastest * (i + 1) + (1 + 3 * StepCostModel::kPriorRowCost) *
                                           (StepCostModel::kMinSamples - i - 1)) /
                      StepCostModel::kMinSamples,
                  1e-12)
          << i;
    ASSERT_EQ(m.trusted(4), i + 1 >= StepCostModel::kMinSamples) << i;
  }
  EXPECT_FALSE(m.trusted(3));
  m.record(0, 1.0);  // ignored
  m.record(2, -1.0);
  m.record(2, std::nan(""));
  EXPECT_FALSE(m.trusted(2));
  // Old steps age out: the row count is tried again.
  for (int64_t i = 0; i < StepCostModel::kMaxAge; ++i) m.record(1, 1.0);
  EXPECT_FALSE(m.trusted(4));
  EXPECT_TRUE(m.trusted(1));
}

TEST(StepCostModel, UnmeasuredRowCounts) {
  StepCostModel m;
  const double prior = StepCostModel::kPriorRowCost;
  // Nothing measured: the prior shape.
  EXPECT_DOUBLE_EQ(m.cost(1), 1.0);
  EXPECT_DOUBLE_EQ(m.cost(5), 1 + 4 * prior);
  for (int i = 0; i < StepCostModel::kMinSamples; ++i) {
    m.record(2, 0.010);
    m.record(6, 0.030);
  }
  // Between two trusted: on the line between them.
  EXPECT_NEAR(m.cost(4), 0.020, 1e-15);
  EXPECT_NEAR(m.cost(3), 0.015, 1e-15);
  // Below the first: the prior shape scaled to it. Past the last: the slope
  // from the one before.
  EXPECT_NEAR(m.cost(1), 0.010 / (1 + prior), 1e-15);
  EXPECT_NEAR(m.cost(9), 0.030 + 3 * (0.030 - 0.010) / 4, 1e-15);
  // One slow step (a first one touching new memory) is not trusted: the
  // missing ones count as the neighbours' line.
  m.record(4, 0.5);
  EXPECT_NEAR(m.cost(4), (0.5 + 2 * 0.020) / 3, 1e-15);
  m.record(4, 0.4);
  m.record(4, 0.3);
  EXPECT_EQ(m.cost(4), 0.3);
  // Past the last with a slope below the prior's: the prior's.
  StepCostModel flat;
  for (int i = 0; i < StepCostModel::kMinSamples; ++i) {
    flat.record(1, 0.010);
    flat.record(2, 0.010);
  }
  EXPECT_NEAR(flat.cost(5), 0.010 * (1 + 4 * prior) / (1 + prior), 1e-15);
}

}  // namespace
}  // namespace pagellm
