// Presence/frequency penalties (OpenAI's rule, over generated tokens only) and
// log-probabilities of the penalised distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/sampler.h"
#include "util/error.h"

namespace pagellm {
namespace {

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

int32_t sample_once(const SamplingParams& p, const std::vector<float>& logits,
                    const std::vector<int32_t>& history, size_t n_prompt) {
  Sampler s(p);
  return s.sample(logits.data(), static_cast<int>(logits.size()), history, n_prompt);
}

TEST(SamplerPenalties, PresenceCountsOnlyGeneratedTokens) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.5f};
  SamplingParams p = greedy();
  p.presence_penalty = 1.0f;
  // Token 1 only in the prompt: no penalty.
  EXPECT_EQ(sample_once(p, logits, {1, 1, 1}, 3), 1);
  // Token 1 generated once: 3 - 1 = 2 < 2.5.
  EXPECT_EQ(sample_once(p, logits, {0, 1}, 1), 2);
  // Presence does not grow with the count: 3 - 1 = 2 whether seen 1 or 5 times.
  p.presence_penalty = 0.4f;
  EXPECT_EQ(sample_once(p, logits, {1, 1, 1, 1, 1}, 0), 1);
  // Negative values encourage repetition.
  p.presence_penalty = -1.0f;
  EXPECT_EQ(sample_once(p, {0.0f, 2.0f, 2.5f}, {1}, 0), 1);
}

TEST(SamplerPenalties, FrequencyGrowsWithTheCount) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.5f};
  SamplingParams p = greedy();
  p.frequency_penalty = 0.2f;
  EXPECT_EQ(sample_once(p, logits, {1, 1}, 0), 1);     // 3 - 0.4 = 2.6
  EXPECT_EQ(sample_once(p, logits, {1, 1, 1}, 0), 2);  // 3 - 0.6 = 2.4
  EXPECT_EQ(sample_once(p, logits, {1, 1, 1}, 2), 1);  // only one generated: 2.8
}

TEST(SamplerPenalties, Validation) {
  SamplingParams p;
  p.presence_penalty = 2.5f;
  EXPECT_THROW(p.validate(), ConfigError);
  p.presence_penalty = -2.0f;
  EXPECT_NO_THROW(p.validate());
  p.frequency_penalty = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(p.validate(), ConfigError);
  p.frequency_penalty = -2.01f;
  EXPECT_THROW(p.validate(), ConfigError);
}

TEST(SamplerLogprobs, LogSoftmaxOfPenalisedLogitsIndependentOfTemperature) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 2.0f, -1.0f};
  for (float temp : {0.0f, 0.7f, 1.5f}) {
    SamplingParams p;
    p.temperature = temp;
    p.seed = 3;
    Sampler s(p);
    const int32_t id = s.sample(logits.data(), 5, {});
    std::vector<TokenLogprob> top;
    const TokenLogprob lp = s.logprobs(id, 3, &top);
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l));
    EXPECT_EQ(lp.token, id);
    EXPECT_NEAR(lp.logprob, logits[id] - std::log(sum), 1e-6);
    ASSERT_EQ(top.size(), 3u);
    // Most likely first, lower id first on ties.
    EXPECT_EQ(top[0].token, 1);
    EXPECT_EQ(top[1].token, 3);
    EXPECT_EQ(top[2].token, 0);
    EXPECT_FLOAT_EQ(top[0].logprob, top[1].logprob);
    EXPECT_NEAR(top[2].logprob, 1.0 - std::log(sum), 1e-6);
  }
}

TEST(SamplerLogprobs, SeesThePenalties) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.5f};
  SamplingParams p = greedy();
  p.frequency_penalty = 1.0f;
  Sampler s(p);
  const std::vector<int32_t> history = {1};
  EXPECT_EQ(s.sample(logits.data(), 3, history, 0), 2);
  std::vector<TokenLogprob> top;
  s.logprobs(2, 2, &top);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].token, 2);  // 2.5 beats the penalised 2.0
  EXPECT_EQ(top[1].token, 1);
  const double lse = std::log(std::exp(0.0) + std::exp(2.0) + std::exp(2.5));
  EXPECT_NEAR(top[1].logprob, 2.0 - lse, 1e-6);
}

TEST(SamplerLogprobs, ImpossibleTokensAreMinusInfinityAndTopNIsClamped) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {nan, 1.0f};
  Sampler s(greedy());
  EXPECT_EQ(s.sample(logits.data(), 2, {}), 1);
  std::vector<TokenLogprob> top;
  EXPECT_FLOAT_EQ(s.logprobs(1, 10, &top).logprob, 0.0f);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_TRUE(std::isinf(top[1].logprob) && top[1].logprob < 0);
  EXPECT_THROW(s.logprobs(2, 0, nullptr), Error);
}

}  // namespace
}  // namespace pagellm
