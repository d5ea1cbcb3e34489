// Log-probabilities and presence/frequency penalties through the engine.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/engine.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

struct Loaded {
  Loaded() {
    model = ModelRunner::load(test::data_path("stories260K.gguf"));
    tok = Tokenizer::from_gguf(model->file());
  }
  std::unique_ptr<ModelRunner> model;
  std::unique_ptr<Tokenizer> tok;
};

std::vector<SeqEvent> run(Loaded& m, const Request& r) {
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  Engine engine(*m.model, *m.tok, pool, cfg);
  std::vector<SeqEvent> events;
  engine.submit(r, [&](const SeqEvent& ev) { events.push_back(ev); });
  while (engine.has_work()) engine.step();
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0);
  return events;
}

Request greedy(Loaded& m, int n) {
  Request r;
  r.prompt = m.tok->encode("Once upon a time");
  r.max_tokens = n;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

TEST(EngineLogprobs, EveryTokenCarriesItsLogprobAndAlternatives) {
  Loaded m;
  Request r = greedy(m, 12);
  r.logprobs = 3;
  const auto events = run(m, r);
  int with_token = 0;
  for (const auto& ev : events) {
    if (ev.token < 0) continue;
    ++with_token;
    ASSERT_TRUE(ev.has_logprob);
    ASSERT_EQ(ev.top_logprobs.size(), 3u);
    // Greedy: the sampled token is the most likely one.
    EXPECT_EQ(ev.top_logprobs[0].token, ev.token);
    EXPECT_FLOAT_EQ(ev.top_logprobs[0].logprob, ev.logprob);
    EXPECT_LE(ev.logprob, 0.0f);
    EXPECT_GE(ev.top_logprobs[0].logprob, ev.top_logprobs[1].logprob);
    EXPECT_GE(ev.top_logprobs[1].logprob, ev.top_logprobs[2].logprob);
  }
  EXPECT_EQ(with_token, 12);  // the final event carries the last token's too
}

TEST(EngineLogprobs, OffByDefaultAndZeroMeansTheTokenOnly) {
  Loaded m;
  Request r = greedy(m, 4);
  for (const auto& ev : run(m, r)) EXPECT_FALSE(ev.has_logprob);
  r.logprobs = 0;
  for (const auto& ev : run(m, r)) {
    if (ev.token < 0) continue;
    EXPECT_TRUE(ev.has_logprob);
    EXPECT_TRUE(ev.top_logprobs.empty());
  }
  r.logprobs = 21;
  ThreadPool pool(1);
  EngineConfig cfg;
  cfg.num_blocks = 16;
  Engine engine(*m.model, *m.tok, pool, cfg);
  EXPECT_THROW(engine.submit(r, nullptr), ConfigError);
}

TEST(EnginePenalties, FrequencyPenaltyChangesRepetitiveGreedyOutput) {
  Loaded m;
  Request r = greedy(m, 48);
  std::vector<int32_t> plain, penalised;
  for (const auto& ev : run(m, r))
    if (ev.token >= 0) plain.push_back(ev.token);
  r.sampling.frequency_penalty = 2.0f;
  r.sampling.presence_penalty = 2.0f;
  for (const auto& ev : run(m, r))
    if (ev.token >= 0) penalised.push_back(ev.token);
  ASSERT_EQ(plain.size(), 48u);
  ASSERT_EQ(penalised.size(), 48u);
  EXPECT_NE(plain, penalised);
  auto distinct = [](const std::vector<int32_t>& v) {
    std::map<int32_t, int> c;
    for (int32_t t : v) ++c[t];
    return c.size();
  };
  EXPECT_GT(distinct(penalised), distinct(plain));
}

}  // namespace
}  // namespace pagellm
