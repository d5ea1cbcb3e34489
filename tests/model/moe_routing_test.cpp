// route_tokens against a naive rendition: per token, every expert's score
// computed in double, experts sorted by (score + bias) with ties to the lower
// id, weights renormalised; and the grouping is a permutation that keeps
// tokens ascending within each expert.
#include "model/moe_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace pagellm {
namespace {

struct Naive {
  std::vector<int32_t> expert;
  std::vector<double> weight;
};

Naive naive_route(const std::vector<float>& logits, int64_t T, int32_t X, int32_t k,
                  const RouterOptions& o, const std::vector<float>& bias) {
  Naive out;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> p(static_cast<size_t>(X));
    double mx = -1e300, sum = 0;
    for (int32_t e = 0; e < X; ++e) mx = std::max(mx, double(logits[size_t(t * X + e)]));
    for (int32_t e = 0; e < X; ++e) {
      const double l = logits[size_t(t * X + e)];
      p[size_t(e)] = o.gating == ExpertGating::kSoftmax ? std::exp(l - mx) : 1 / (1 + std::exp(-l));
      sum += p[size_t(e)];
    }
    if (o.gating == ExpertGating::kSoftmax)
      for (double& v : p) v /= sum;
    std::vector<int32_t> ids(static_cast<size_t>(X));
    std::iota(ids.begin(), ids.end(), 0);
    auto key = [&](int32_t e) { return p[size_t(e)] + (bias.empty() ? 0.0 : bias[size_t(e)]); };
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
    double chosen = 0;
    for (int32_t j = 0; j < k; ++j) chosen += p[size_t(ids[size_t(j)])];
    for (int32_t j = 0; j < k; ++j) {
      out.expert.push_back(ids[size_t(j)]);
      out.weight.push_back((o.renormalize ? p[size_t(ids[size_t(j)])] / chosen
                                          : p[size_t(ids[size_t(j)])]) * o.scale);
    }
  }
  return out;
}

TEST(MoeRouting, MatchesTheNaiveRouterAndGroupsByExpert) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 2);
  int checked = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const int32_t X = 1 + static_cast<int32_t>(rng() % 16);
    const int32_t k = 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(X));
    const int64_t T = static_cast<int64_t>(rng() % 20);
    RouterOptions o;
    o.gating = rng() % 3 == 0 ? ExpertGating::kSigmoid : ExpertGating::kSoftmax;
    o.renormalize = rng() % 4 != 0;
    o.scale = rng() % 2 ? 1.0f : 2.5f;
    std::vector<float> logits(static_cast<size_t>(T * X)), bias;
    // Well-separated logits (a coarse grid: no float near-ties) plus exact ties.
    for (float& l : logits) l = std::round(normal(rng) * 8) / 8;
    if (rng() % 3 == 0)
      for (int32_t e = 0; e < X; ++e) bias.push_back(std::round(normal(rng) * 4) / 64);
    MoeRouting r;
    route_tokens(logits.data(), T, X, k, o, bias.empty() ? nullptr : bias.data(), r);
    const Naive want = naive_route(logits, T, X, k, o, bias);
    ASSERT_EQ(r.expert, want.expert) << "iter " << iter;
    for (size_t s = 0; s < want.weight.size(); ++s)
      ASSERT_NEAR(r.weight[s], want.weight[s], 1e-5 * std::max(1.0, want.weight[s]));
    // Grouping: offsets partition the T*k rows; each row is its slot's.
    ASSERT_EQ(r.offsets.size(), static_cast<size_t>(X) + 1);
    ASSERT_EQ(r.offsets.back(), T * k);
    std::vector<int> seen(static_cast<size_t>(T * k), 0);
    for (int64_t t = 0; t < T; ++t)
      for (int32_t j = 0; j < k; ++j) {
        const size_t s = static_cast<size_t>(t * k + j);
        const int32_t row = r.slot_row[s], e = r.expert[s];
        ASSERT_GE(row, r.offsets[size_t(e)]);
        ASSERT_LT(row, r.offsets[size_t(e) + 1]);
        ASSERT_EQ(r.row_token[size_t(row)], t);
        ++seen[size_t(row)];
      }
    for (int c : seen) ASSERT_EQ(c, 1);
    for (int32_t e = 0; e < X; ++e)
      for (int32_t row = r.offsets[size_t(e)] + 1; row < r.offsets[size_t(e) + 1]; ++row)
        ASSERT_LT(r.row_token[size_t(row - 1)], r.row_token[size_t(row)]);  // ascending, once
    ++checked;
  }
  EXPECT_EQ(checked, 300);
}

// A token's experts and weights do not depend on the other tokens of the step.
TEST(MoeRouting, EachTokenIsRoutedAlone) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  const int32_t X = 8, k = 2;
  std::vector<float> logits(static_cast<size_t>(32 * X));
  for (float& l : logits) l = normal(rng);
  MoeRouting all, one;
  route_tokens(logits.data(), 32, X, k, {}, nullptr, all);
  for (int64_t t = 0; t < 32; ++t) {
    route_tokens(logits.data() + t * X, 1, X, k, {}, nullptr, one);
    for (int32_t j = 0; j < k; ++j) {
      EXPECT_EQ(one.expert[size_t(j)], all.expert[size_t(t * k + j)]);
      EXPECT_EQ(one.weight[size_t(j)], all.weight[size_t(t * k + j)]);
    }
  }
}

// gpt-oss: the k highest raw logits, weights the softmax over those k only
// (in double here), highest first.
TEST(MoeRouting, SoftmaxOfTheChosenLogits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int32_t X = 6, k = 2;
  const int64_t T = 50;
  std::vector<float> logits(static_cast<size_t>(T * X));
  for (float& v : logits) v = nd(rng);
  MoeRouting r;
  route_tokens(logits.data(), T, X, k, {.gating = ExpertGating::kSoftmaxOfChosen}, nullptr, r);
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits.data() + t * X;
    std::vector<int32_t> idx(X);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    const double e1 = std::exp(static_cast<double>(l[idx[1]]) - l[idx[0]]);
    EXPECT_EQ(r.expert[static_cast<size_t>(t * k)], idx[0]);
    EXPECT_EQ(r.expert[static_cast<size_t>(t * k + 1)], idx[1]);
    EXPECT_NEAR(r.weight[static_cast<size_t>(t * k)], 1.0 / (1.0 + e1), 1e-6);
    EXPECT_NEAR(r.weight[static_cast<size_t>(t * k + 1)], e1 / (1.0 + e1), 1e-6);
  }
}

}  // namespace
}  // namespace pagellm
