// Logit bias (SamplingParams::logit_bias): a draw with a bias equals the
// same draw without it on logits that already carry the bias (the naive
// rule: add, then sample), in every mode (greedy, top_k, top_p, min_p, full
// vocabulary) and with presence/frequency penalties; log-probabilities are
// those of the biased logits; -100 bans and +100 forces; bad biases are
// refused. In the engine, speculative decoding with a bias gives the tokens
// plain decoding with it gives.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/engine_runner.h"
#include "engine/sampler.h"
#include "util/error.h"

namespace pagellm {
namespace {

// Logits and biases on a 1/8 grid: float sums are exact, so biasing in the
// test and in the sampler round alike.
std::vector<float> grid_logits(int n, std::mt19937& rng) {
  std::uniform_int_distribution<int> v(-80, 80);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& x : out) x = static_cast<float>(v(rng)) / 8.0f;
  return out;
}

std::vector<std::pair<int32_t, float>> grid_bias(int n, std::mt19937& rng) {
  std::uniform_int_distribution<int> id(0, n - 1), v(-800, 800), count(1, 12);
  std::vector<std::pair<int32_t, float>> out;
  for (int k = count(rng); k > 0; --k) {
    const int32_t t = id(rng);
    bool seen = false;
    for (const auto& [o, _] : out) seen = seen || o == t;
    if (!seen) out.emplace_back(t, static_cast<float>(v(rng)) / 8.0f);
  }
  return out;
}

TEST(SamplerLogitBias, EqualsSamplingPreBiasedLogitsInEveryMode) {
  std::mt19937 rng(5);
  int checked = 0, changed = 0;
  for (int n : {1, 5, 300, 4000}) {
    for (int trial = 0; trial < 6; ++trial) {
      const auto logits = grid_logits(n, rng);
      const auto bias = grid_bias(n, rng);
      std::vector<float> biased = logits;
      for (const auto& [id, b] : bias) biased[static_cast<size_t>(id)] += b;
      const std::vector<int32_t> history = {0, n - 1, 0, n / 2};  // prompt {0}, then 3 generated
      for (float temp : {0.0f, 0.3f, 1.0f, 2.5f}) {
        for (int32_t top_k : {0, 1, 7}) {
          for (auto [top_p, min_p] : {std::pair{1.0f, 0.0f}, {0.8f, 0.0f}, {1.0f, 0.1f}}) {
            for (float presence : {0.0f, 0.75f}) {
              SamplingParams ref;
              ref.temperature = temp;
              ref.top_k = top_k;
              ref.top_p = top_p;
              ref.min_p = min_p;
              ref.presence_penalty = presence;
              ref.frequency_penalty = presence / 3.0f;
              ref.seed = static_cast<uint64_t>(checked);
              SamplingParams p = ref;
              p.logit_bias = bias;
              Sampler with(p), reference(ref), unbiased(ref);
              for (int draw = 0; draw < 4; ++draw) {
                const int32_t a = with.sample(logits.data(), n, history, 1);
                const int32_t b = reference.sample(biased.data(), n, history, 1);
                changed += a != unbiased.sample(logits.data(), n, history, 1);
                ASSERT_EQ(a, b) << "n " << n << " temp " << temp << " top_k " << top_k
                                << " top_p " << top_p << " min_p " << min_p;
                std::vector<TokenLogprob> ta, tb;
                const TokenLogprob la = with.logprobs(a, 3, &ta), lb = reference.logprobs(b, 3, &tb);
                ASSERT_EQ(la.logprob, lb.logprob);
                ASSERT_EQ(ta.size(), tb.size());
                for (size_t i = 0; i < ta.size(); ++i) {
                  ASSERT_EQ(ta[i].token, tb[i].token);
                  ASSERT_EQ(ta[i].logprob, tb[i].logprob);
                }
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(changed, checked / 10) << "the biases should change many draws";
}

TEST(SamplerLogitBias, LogprobsAreTheBiasedLogSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{1, -3.0f}, {3, 2.5f}};
  Sampler s(p);
  const int32_t t = s.sample(logits.data(), 4, {});
  // float64 by hand: logits {1, -1, 0.5, 1.5}.
  const double l[] = {1.0, -1.0, 0.5, 1.5};
  double sum = 0.0;
  for (double x : l) sum += std::exp(x);
  EXPECT_EQ(t, 3);
  for (int id = 0; id < 4; ++id)
    EXPECT_NEAR(s.logprobs(id, 0, nullptr).logprob, l[id] - std::log(sum), 1e-6) << id;
}

TEST(SamplerLogitBias, MinusHundredBansAndPlusHundredForces) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    auto logits = grid_logits(1000, rng);
    const int32_t best = first_argmax(logits.data(), 1000);
    SamplingParams ban;
    ban.temperature = 0.0f;
    ban.logit_bias = {{best, -100.0f}};
    EXPECT_NE(Sampler(ban).sample(logits.data(), 1000, {}), best);
    SamplingParams force;
    force.temperature = 1.5f;
    force.top_k = 0;
    force.top_p = 1.0f;
    force.min_p = 0.0f;
    force.seed = static_cast<uint64_t>(trial);
    const int32_t chosen = static_cast<int32_t>(rng() % 1000);
    force.logit_bias = {{chosen, 100.0f}};
    Sampler s(force);
    for (int k = 0; k < 20; ++k) EXPECT_EQ(s.sample(logits.data(), 1000, {}), chosen);
  }
  // A masked (-inf) token stays impossible whatever its bias.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> masked = {-inf, 0.0f, -inf};
  SamplingParams p;
  p.temperature = 1.0f;
  p.logit_bias = {{0, 100.0f}, {2, 100.0f}};
  Sampler s(p);
  for (int k = 0; k < 20; ++k) EXPECT_EQ(s.sample(masked.data(), 3, {}), 1);
}

TEST(SamplerLogitBias, BadBiasesAreRefused) {
  for (float b : {100.5f, -101.0f, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()}) {
    SamplingParams p;
    p.logit_bias = {{1, b}};
    EXPECT_THROW(p.validate(), ConfigError) << b;
  }
  SamplingParams p;
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(p.validate(), ConfigError);
  p.logit_bias = {{5, 1.0f}};
  Sampler s(p);
  const std::vector<float> logits(5, 0.0f);
  EXPECT_THROW(s.sample(logits.data(), 5, {}), Error);  // id 5 is outside n_vocab 5
}

// Speculation verifies with the sequence's own sampler, bias included: the
// tokens equal plain decoding's with the same bias, and the bias matters.
TEST(SamplerLogitBias, SpeculativeDecodingKeepsTheBiasedTokens) {
  test::Loaded m = test::load("stories260K.gguf");
  auto prompts = test::make_prompts(*m.tok, 6);
  for (auto& p : prompts) {  // prompts that quote themselves: prompt lookup finds drafts
    const std::vector<int32_t> copy = p;
    p.insert(p.end(), copy.begin() + 1, copy.end());
  }
  auto run = [&](float temperature, bool spec, bool biased, EngineStats* stats) {
    EngineConfig cfg = test::solo_config();
    cfg.scheduler.max_num_seqs = 8;
    cfg.num_blocks = 128;
    if (spec) {
      cfg.speculation.ngram = 3;
      cfg.speculation.draft_max = 4;
      cfg.speculation.max_batch = 64;  // drafts while all of them decode
    }
    ThreadPool pool(2);
    Engine engine(*m.model, *m.tok, pool, cfg);
    test::Outputs outs;
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r;
      r.prompt = prompts[i];
      r.sampling.temperature = temperature;
      r.sampling.seed = 77 + i;
      // Ban a few of the prompt's tokens, favour another.
      if (biased)
        r.sampling.logit_bias = {{prompts[i][1], -100.0f}, {prompts[i][2], -5.0f}, {prompts[i][3], 4.0f}};
      r.max_tokens = 40;
      r.ignore_eos = true;
      ids.push_back(engine.submit(r, [&outs](const SeqEvent& ev) {
        if (ev.token >= 0) outs[ev.request_id].push_back(ev.token);
      }));
    }
    while (engine.has_work()) engine.step();
    if (stats) *stats = engine.stats();
    std::vector<std::vector<int32_t>> res;
    for (uint64_t id : ids) res.push_back(outs[id]);
    return res;
  };
  for (float temperature : {0.0f, 0.8f}) {
    EngineStats st;
    const auto plain = run(temperature, false, true, nullptr);
    const auto spec = run(temperature, true, true, &st);
    const auto unbiased = run(temperature, false, false, nullptr);
    EXPECT_EQ(spec, plain) << "temperature " << temperature;
    EXPECT_NE(plain, unbiased) << "temperature " << temperature;
    EXPECT_GT(st.spec_accepted, 0u);
    for (size_t i = 0; i < prompts.size(); ++i)
      for (int32_t t : plain[i]) EXPECT_NE(t, prompts[i][1]) << "a banned token was drawn";
  }
}

}  // namespace
}  // namespace pagellm
