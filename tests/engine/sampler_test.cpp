#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <utility>

#include "util/error.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;

SamplingParams plain(float temperature, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

int32_t sample_once(const SamplingParams& p, const std::vector<float>& logits,
                    const Ids& history = {}) {
  Sampler s(p);
  return s.sample(logits.data(), static_cast<int>(logits.size()), history);
}

// How often each id comes out in `n` draws.
std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i)
    ++counts[s.sample(logits.data(), static_cast<int>(logits.size()), {})];
  return counts;
}

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> out(n);
  for (float& x : out) x = d(gen);
  return out;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  EXPECT_EQ(sample_once(plain(0), {1.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(sample_once(plain(0), {1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(sample_once(plain(0), {5.0f, 5.0f}), 0);
  EXPECT_EQ(sample_once(plain(0), {-2.0f, -1.0f}), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sample_once(plain(0), {nan, -1.0f, nan}), 1);  // NaN counts as -inf
}

// first_argmax against a plain scan (the first strictly larger value wins;
// NaN is -infinity): lengths on and off its 8-lane stride, ties between and
// within lanes, NaN and infinities anywhere.
TEST(Sampler, FirstArgmaxEqualsTheFirstLargestOfAPlainScan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto scan = [](const std::vector<float>& x) {
    int32_t best = 0;
    auto v = [&](size_t i) {
      return std::isnan(x[i]) ? -std::numeric_limits<float>::infinity() : x[i];
    };
    for (size_t i = 1; i < x.size(); ++i)
      if (v(i) > v(static_cast<size_t>(best))) best = static_cast<int32_t>(i);
    return best;
  };
  std::mt19937 gen(5);
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 100, 1000, 32003}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      // Few distinct values: ties are common.
      std::uniform_int_distribution<int> level(-3, 3), what(0, 19), at(0, n - 1);
      for (float& v : x) v = static_cast<float>(level(gen));
      for (int k = 0; k < 1 + n / 10; ++k) {
        const int w = what(gen);
        float& v = x[static_cast<size_t>(at(gen))];
        if (w == 0) v = nan;
        if (w == 1) v = -inf;
        if (w == 2 && trial % 4 == 0) v = inf;
      }
      ASSERT_EQ(first_argmax(x.data(), n), scan(x)) << n << " trial " << trial;
    }
    std::vector<float> none(static_cast<size_t>(n), nan);
    EXPECT_EQ(first_argmax(none.data(), n), 0);
    for (size_t i = 0; i < none.size(); i += 2) none[i] = -inf;
    EXPECT_EQ(first_argmax(none.data(), n), 0);
    none.back() = -1e30f;
    EXPECT_EQ(first_argmax(none.data(), n), n - 1);
  }
}

// The plain greedy draw (no penalty: nothing copied) gives the token and
// log-probabilities that the full path gives (temperature > 0, top_k 1: the
// same best token, the same penalised distribution).
TEST(Sampler, PlainGreedyLogprobsEqualTheFullPath) {
  auto logits = random_logits(1003, 17);
  logits[5] = std::numeric_limits<float>::quiet_NaN();
  SamplingParams full = plain(0.7f);
  full.top_k = 1;
  Sampler g(plain(0)), f(full);
  const int32_t a = g.sample(logits.data(), 1003, {}), b = f.sample(logits.data(), 1003, {});
  ASSERT_EQ(a, b);
  std::vector<TokenLogprob> top_g, top_f;
  const TokenLogprob lg = g.logprobs(a, 5, &top_g), lf = f.logprobs(b, 5, &top_f);
  EXPECT_EQ(lg.logprob, lf.logprob);
  ASSERT_EQ(top_g.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(top_g[i].token, top_f[i].token);
    EXPECT_EQ(top_g[i].logprob, top_f[i].logprob);
  }
  EXPECT_EQ(g.logprobs(5, 0, nullptr).logprob, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(g.draws(), 1u);
}

// top_k = k draws what top_k = 0 draws from logits where everything but the
// k best (by a full sort: higher logit, then lower id) is -infinity: the same
// tokens draw for draw, with ties at the cut, NaN, and with penalties.
TEST(Sampler, TopKEqualsNoTopKOverTheKBestOfAFullSort) {
  std::mt19937 gen(11);
  for (int n : {50, 1000, 4099}) {
    for (int k : {1, 2, 7, 40, 49}) {
      if (k >= n) continue;
      std::vector<float> logits(static_cast<size_t>(n));
      std::uniform_int_distribution<int> level(0, 30);
      for (float& x : logits) x = 0.25f * static_cast<float>(level(gen));  // many ties
      logits[3] = std::numeric_limits<float>::quiet_NaN();
      for (bool penalty : {false, true}) {
        SamplingParams p = plain(0.8f, 7 + static_cast<uint64_t>(k));
        p.top_p = 0.9f;
        p.min_p = 0.02f;
        if (penalty) p.repetition_penalty = 1.5f;
        const Ids history = {5, 9, 5, static_cast<int32_t>(n - 1)};
        // The reference: penalised values, a full sort, the k best kept.
        std::vector<float> pen = logits;
        if (penalty)
          for (int32_t id : {5, 9, n - 1}) {
            float& l = pen[static_cast<size_t>(id)];
            l = l > 0 ? l / 1.5f : l * 1.5f;
          }
        std::vector<int32_t> order(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
        auto val = [&](int32_t i) {
          const float v = pen[static_cast<size_t>(i)];
          return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
        };
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
          return val(a) > val(b) || (val(a) == val(b) && a < b);
        });
        std::vector<float> masked(static_cast<size_t>(n), -std::numeric_limits<float>::infinity());
        for (int i = 0; i < k; ++i)
          masked[static_cast<size_t>(order[static_cast<size_t>(i)])] =
              pen[static_cast<size_t>(order[static_cast<size_t>(i)])];
        SamplingParams q = p;
        q.top_k = 0;
        q.repetition_penalty = 1.0f;
        p.top_k = k;
        Sampler a(p), b(q);
        for (int d = 0; d < 100; ++d)
          ASSERT_EQ(a.sample(logits.data(), n, history), b.sample(masked.data(), n, history))
              << "n " << n << " k " << k << " penalty " << penalty << " draw " << d;
      }
    }
  }
}

// Every token as a candidate (top_k 0: value buckets, sorted where needed) walks
// them in the order the comparison sort of the top_k path gives (higher
// value, then lower id; -0 == +0): top_k = n - 1, which drops only an
// impossible token, draws the same tokens, over values of every sign and
// size, ties, NaN and -infinity, with and without penalties (float and
// double values).
TEST(Sampler, AllCandidatesInTheComparisonOrder) {
  std::mt19937 gen(23);
  const float inf = std::numeric_limits<float>::infinity();
  for (int n : {3, 64, 777, 5000}) {
    std::vector<float> logits(static_cast<size_t>(n));
    std::uniform_int_distribution<int> kind(0, 9), level(-4, 4);
    std::normal_distribution<float> wide(0.0f, 30.0f);
    for (float& x : logits) {
      const int k = kind(gen);
      x = k < 4    ? 0.5f * static_cast<float>(level(gen))
          : k < 6  ? (k == 4 ? 0.0f : -0.0f)
          : k < 8  ? wide(gen)
          : k == 8 ? std::numeric_limits<float>::quiet_NaN()
                   : 1e-30f * static_cast<float>(level(gen));
    }
    logits[static_cast<size_t>(n) - 1] = -inf;  // at least one impossible token
    for (bool penalty : {false, true}) {
      SamplingParams p = plain(1.5f, 31 + static_cast<uint64_t>(n));
      if (penalty) p.presence_penalty = 0.3f;
      const Ids history = {0, 1, 2};
      SamplingParams q = p;
      p.top_k = 0;
      q.top_k = n - 1;
      Sampler all(p), cut(q);
      for (int d = 0; d < 200; ++d)
        ASSERT_EQ(all.sample(logits.data(), n, history, 1),
                  cut.sample(logits.data(), n, history, 1))
            << "n " << n << " penalty " << penalty << " draw " << d;
    }
  }
}

// The header's rule written plainly for every token a candidate: a full
// sort (higher value, then lower id), probabilities, the top_p then min_p
// cuts, the walk to u x kept. `values` are after the penalties, NaN as -inf.
class ReferenceDraw {
 public:
  ReferenceDraw(const std::vector<double>& values, const SamplingParams& p) {
    const int n = static_cast<int>(values.size());
    for (int i = 0; i < n; ++i) ids_.push_back(i);
    std::sort(ids_.begin(), ids_.end(), [&](int a, int b) {
      return values[a] > values[b] || (values[a] == values[b] && a < b);
    });
    const double max = values[ids_[0]];
    for (int id : ids_) probs_.push_back(std::exp((values[id] - max) / p.temperature));
    double total = 0.0;
    for (double q : probs_) total += q;
    keep_ = probs_.size();
    if (p.top_p < 1.0f) {
      double cum = 0.0;
      for (size_t i = 0; i < probs_.size(); ++i) {
        cum += probs_[i];
        if (cum >= static_cast<double>(p.top_p) * total) {
          keep_ = i + 1;
          break;
        }
      }
    }
    if (p.min_p > 0.0f) {
      size_t k = 1;
      while (k < keep_ && probs_[k] >= static_cast<double>(p.min_p) * probs_[0]) ++k;
      keep_ = k;
    }
    for (size_t i = 0; i < keep_; ++i) kept_ += probs_[i];
    impossible_ = max == -std::numeric_limits<double>::infinity();
  }
  int32_t draw(double u) const {
    if (impossible_) return ids_[0];
    double cum = 0.0;
    size_t last_positive = 0;
    for (size_t i = 0; i < keep_; ++i) {
      cum += probs_[i];
      if (cum > u * kept_) return ids_[i];
      if (probs_[i] > 0.0) last_positive = i;
    }
    return ids_[last_positive];
  }

 private:
  std::vector<int32_t> ids_;
  std::vector<double> probs_;
  size_t keep_ = 0;
  double kept_ = 0.0;
  bool impossible_ = false;
};

// Draw by draw equal to the reference over the generator's uniforms, for
// value sets with many ties (where the buckets are crowded), wide spreads
// (most tokens in the open last bucket), NaN, +-infinity and signed zeros,
// at temperatures from near greedy to flat, with top_p and min_p cuts.
TEST(Sampler, EveryTokenDrawEqualsAFullSortReference) {
  std::mt19937 gen(41);
  const float inf = std::numeric_limits<float>::infinity();
  int config = 0;
  for (int n : {1, 2, 7, 300, 5000, 20000}) {
    for (int shape = 0; shape < 4; ++shape) {
      std::vector<float> logits(static_cast<size_t>(n));
      std::uniform_int_distribution<int> kind(0, 9), level(-6, 6);
      std::normal_distribution<float> normal(0.0f, shape == 1 ? 30.0f : 3.0f);
      for (float& x : logits) {
        const int k = kind(gen);
        x = shape == 0 ? 0.25f * static_cast<float>(level(gen))  // crowded ties
            : k < 7    ? normal(gen)
            : k == 7   ? (level(gen) < 0 ? -0.0f : 0.0f)
            : k == 8   ? std::numeric_limits<float>::quiet_NaN()
                       : -inf;
      }
      if (shape == 3 && n > 2) logits[static_cast<size_t>(n) / 2] = inf;
      for (float temp : {0.05f, 1.0f, 4.0f}) {
        for (auto [top_p, min_p] :
             {std::pair{1.0f, 0.0f}, {0.9f, 0.0f}, {1.0f, 0.05f}, {0.3f, 0.01f}, {1e-6f, 0.0f}}) {
          for (bool penalty : {false, true}) {
            SamplingParams p = plain(temp, 1000 + static_cast<uint64_t>(config++));
            p.top_p = top_p;
            p.min_p = min_p;
            const Ids history = {0, n - 1, n / 2};
            if (penalty) p.presence_penalty = 0.3f;
            std::vector<double> values(logits.size());
            for (size_t i = 0; i < logits.size(); ++i)
              values[i] = std::isnan(logits[i]) ? -std::numeric_limits<double>::infinity()
                                                : static_cast<double>(logits[i]);
            if (penalty)
              for (size_t h = 1; h < history.size(); ++h)
                if (h == 1 || history[h] != history[1])
                  values[static_cast<size_t>(history[h])] -= static_cast<double>(0.3f);
            const ReferenceDraw reference(values, p);
            std::mt19937_64 uniforms(p.seed);
            Sampler s(p);
            for (int d = 0; d < 30; ++d) {
              const double u = static_cast<double>(uniforms() >> 11) * 0x1.0p-53;
              ASSERT_EQ(s.sample(logits.data(), n, history, 1), reference.draw(u))
                  << "n " << n << " shape " << shape << " temp " << temp << " top_p " << top_p
                  << " min_p " << min_p << " penalty " << penalty << " draw " << d;
            }
          }
        }
      }
    }
  }
}

TEST(Sampler, TopK1IsGreedyAtAnyTemperature) {
  const std::vector<float> logits = random_logits(1000, 7);
  const int32_t best = sample_once(plain(0), logits);
  for (float temp : {0.1f, 1.0f, 5.0f, 100.0f}) {
    SamplingParams p = plain(temp, 42);
    p.top_k = 1;
    Sampler s(p);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(s.sample(logits.data(), 1000, {}), best) << temp;
  }
  SamplingParams p = plain(3.0f);
  p.top_k = 1;  // ties: the lower id, as greedy
  EXPECT_EQ(sample_once(p, {0.0f, 4.0f, 4.0f}), 1);
}

TEST(Sampler, TinyTopPOnlyEverPicksTheBest) {
  const std::vector<float> logits = random_logits(500, 3);
  const int32_t best = sample_once(plain(0), logits);
  SamplingParams p = plain(2.0f, 9);
  p.top_p = 1e-6f;
  Sampler s(p);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(s.sample(logits.data(), 500, {}), best);
}

TEST(Sampler, TopPKeepsTheShortestPrefixReachingTheMass) {
  // Probabilities 0.4, 0.3, 0.2, 0.1 at temperature 1.
  const std::vector<float> logits = {std::log(0.3f), std::log(0.1f), std::log(0.4f),
                                     std::log(0.2f)};
  SamplingParams p = plain(1.0f, 5);
  p.top_p = 0.6f;  // 0.4 + 0.3 >= 0.6: ids 2 and 0
  Sampler s(p);
  const auto counts = histogram(s, logits, 20000);
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[2] / 20000.0, 4.0 / 7.0, 0.02);
  EXPECT_NEAR(counts[0] / 20000.0, 3.0 / 7.0, 0.02);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // Probabilities 0.5, 0.3, 0.15, 0.05; min_p 0.5 keeps p >= 0.25: ids 0 and 1.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplingParams p = plain(1.0f, 11);
  p.min_p = 0.5f;
  Sampler s(p);
  const auto counts = histogram(s, logits, 20000);
  EXPECT_EQ(counts[2], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[0] / 20000.0, 0.5 / 0.8, 0.02);
  p.min_p = 0.0f;
  Sampler all(p);
  const auto counts_all = histogram(all, logits, 20000);
  EXPECT_GT(counts_all[3], 0);
}

TEST(Sampler, TopKKeepsTheKBest) {
  const std::vector<float> logits = {0.0f, 1.0f, 0.5f, 0.9f, -1.0f};
  SamplingParams p = plain(10.0f, 13);
  p.top_k = 2;
  Sampler s(p);
  const auto counts = histogram(s, logits, 5000);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
}

// Pearson's chi-square of `counts` against softmax(logits / temp).
double chi_square(const std::vector<int>& counts, const std::vector<float>& logits, double temp) {
  double max = logits[0];
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp((logits[i] - max) / temp);
  int n = 0;
  for (int c : counts) n += c;
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double expected = n * p[i] / total;
    chi += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi;
}

TEST(Sampler, DrawsFollowSoftmaxOverTemperature) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -2.0f, 0.25f};
  for (double temp : {0.5, 1.0, 2.5}) {
    Sampler s(plain(static_cast<float>(temp), 1234));
    const auto counts = histogram(s, logits, 100000);
    // 5 degrees of freedom: P(chi2 > 20.5) = 0.001.
    EXPECT_LT(chi_square(counts, logits, temp), 20.5) << "temperature " << temp;
  }
  // The wrong temperature is told apart.
  Sampler s(plain(1.0f, 1234));
  EXPECT_GT(chi_square(histogram(s, logits, 100000), logits, 1.3), 100.0);
}

TEST(Sampler, SameSeedSameSequenceOtherSeedOther) {
  const std::vector<float> logits = random_logits(64, 5);
  auto run = [&](uint64_t seed) {
    Sampler s(plain(1.5f, seed));
    Ids out;
    for (int i = 0; i < 100; ++i) out.push_back(s.sample(logits.data(), 64, out));
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, OneDrawPerTokenAndDiscard) {
  const std::vector<float> logits = random_logits(32, 9);
  Sampler a(plain(1.0f, 99));
  Ids seq;
  for (int i = 0; i < 5; ++i) seq.push_back(a.sample(logits.data(), 32, {}));
  EXPECT_EQ(a.draws(), 5u);

  // Greedy calls use up a draw too, so switching modes keeps later draws aligned.
  SamplingParams greedy = plain(0.0f, 99);
  Sampler g(greedy);
  g.sample(logits.data(), 32, {});
  EXPECT_EQ(g.draws(), 1u);

  Sampler b(plain(1.0f, 99));
  b.discard(3);
  EXPECT_EQ(b.sample(logits.data(), 32, {}), seq[3]);
  EXPECT_EQ(b.sample(logits.data(), 32, {}), seq[4]);
  EXPECT_EQ(b.draws(), 5u);
}

TEST(Sampler, RepetitionPenalty) {
  SamplingParams p = plain(0);
  p.repetition_penalty = 1.1f;
  // Positive logits are divided: 2.0 / 1.1 = 1.82 < 1.9.
  EXPECT_EQ(sample_once(p, {2.0f, 1.9f, -1.0f}, {0}), 1);
  EXPECT_EQ(sample_once(p, {2.0f, 1.9f, -1.0f}, {2}), 0);
  // Negative logits are multiplied: -1.0 * 1.1 = -1.1 < -1.05.
  EXPECT_EQ(sample_once(p, {-1.0f, -1.05f}, {0}), 1);
  // Each distinct token once, however often it occurs.
  EXPECT_EQ(sample_once(p, {2.0f, 1.7f}, {0, 0, 0, 0}), 0);
  // Only the last repeat_last_n ids count.
  p.repeat_last_n = 2;
  EXPECT_EQ(sample_once(p, {2.0f, 1.9f, 0.0f}, {0, 2, 2}), 0);
  EXPECT_EQ(sample_once(p, {2.0f, 1.9f, 0.0f}, {2, 0, 2}), 1);
  p.repeat_last_n = 0;  // off
  EXPECT_EQ(sample_once(p, {2.0f, 1.9f}, {0}), 0);
  p.repeat_last_n = -1;  // the whole history
  Ids long_history(1000, 7);
  long_history[0] = 0;
  EXPECT_EQ(sample_once(p, {2.0f, 1.9f, 0, 0, 0, 0, 0, 0}, long_history), 1);
  // A penalty below 1 favours repeats.
  p.repetition_penalty = 0.5f;
  EXPECT_EQ(sample_once(p, {1.0f, 1.9f}, {0}), 0);
  // History ids must be in range when the penalty looks at them.
  p.repetition_penalty = 1.1f;
  EXPECT_THROW(sample_once(p, {1.0f, 2.0f}, {2}), Error);
}

TEST(Sampler, RepetitionPenaltyChangesSampledDistribution) {
  // Two equal logits; penalising id 0 shifts mass to id 1.
  SamplingParams p = plain(1.0f, 21);
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  const std::vector<float> logits = {1.0f, 1.0f};
  int ones = 0;
  for (int i = 0; i < 10000; ++i) ones += s.sample(logits.data(), 2, Ids{0});
  // p(1) = e^1 / (e^1 + e^0.5) = 0.622
  EXPECT_NEAR(ones / 10000.0, 0.622, 0.02);
}

void expect_config_error(const SamplingParams& p, const std::string& msg) {
  try {
    Sampler s(p);
    ADD_FAILURE() << "no ConfigError; expected " << msg;
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), msg);
  }
}

TEST(Sampler, ValidatesParams) {
  SamplingParams p;
  EXPECT_NO_THROW(p.validate());
  p.temperature = -0.5f;
  expect_config_error(p, "temperature must be >= 0 (got -0.5)");
  p = {};
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  expect_config_error(p, "temperature must be >= 0 (got nan)");
  p = {};
  p.top_k = -1;
  expect_config_error(p, "top_k must be >= 0 (got -1)");
  p = {};
  p.top_p = 0.0f;
  expect_config_error(p, "top_p must be in (0, 1] (got 0)");
  p.top_p = 1.5f;
  expect_config_error(p, "top_p must be in (0, 1] (got 1.5)");
  p = {};
  p.min_p = -0.1f;
  expect_config_error(p, "min_p must be in [0, 1] (got -0.1)");
  p = {};
  p.repetition_penalty = 0.0f;
  expect_config_error(p, "repetition_penalty must be > 0 (got 0)");
  p = {};
  p.repeat_last_n = -2;
  expect_config_error(p, "repeat_last_n must be >= -1 (got -2)");
}

TEST(Sampler, AllMinusInfinityFallsBackToLowestId) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sample_once(plain(1.0f), {-inf, -inf, -inf}), 0);
  EXPECT_EQ(sample_once(plain(1.0f), {-inf, 0.0f, -inf}), 1);
}

}  // namespace
}  // namespace pagellm
