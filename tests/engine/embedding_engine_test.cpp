// Embedding requests through the engine: the vector of an input is the same
// bit for bit alone, batched with other inputs and with generations, in
// small prefill chunks, under preemption and with a prefix cache holding its
// prompt; every block is given back; the pooler against a naive float64
// pooling.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/engine.h"
#include "engine/engine_runner.h"
#include "engine/pooling.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

struct Embedded {
  std::vector<std::vector<float>> vectors;  // per embedding prompt
  std::vector<std::vector<int32_t>> generated;  // per generation prompt
  EngineStats stats;
};

// Submits the generations first (greedy, `gen` tokens each), then the
// embeddings, all at once, and runs the engine dry.
Embedded run_mixed(Loaded& m, const std::vector<std::vector<int32_t>>& embed,
                   const std::vector<std::vector<int32_t>>& generate, EngineConfig cfg,
                   Pooling pooling = Pooling::kMean, int gen = 12) {
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  Embedded out;
  out.vectors.resize(embed.size());
  out.generated.resize(generate.size());
  for (size_t i = 0; i < generate.size(); ++i) {
    Request r;
    r.prompt = generate[i];
    r.sampling.temperature = 0;
    r.max_tokens = gen;
    r.ignore_eos = true;
    engine.submit(r, [&out, i](const SeqEvent& ev) {
      if (ev.token >= 0) out.generated[i].push_back(ev.token);
    });
  }
  std::vector<int> finals(embed.size(), 0);
  for (size_t i = 0; i < embed.size(); ++i) {
    Request r;
    r.prompt = embed[i];
    r.embedding = true;
    r.pooling = pooling;
    r.max_tokens = 50;  // ignored for embeddings
    r.n = 3;            // ignored too
    engine.submit(r, [&, i](const SeqEvent& ev) {
      EXPECT_TRUE(ev.finished) << "an embedding sends one final event";
      EXPECT_EQ(ev.finish_reason, FinishReason::kStop) << ev.error;
      EXPECT_EQ(ev.prompt_tokens, static_cast<int64_t>(embed[i].size()));
      EXPECT_EQ(ev.generated_tokens, 0);
      ++finals[i];
      out.vectors[i] = ev.embedding;
    });
  }
  while (engine.has_work()) engine.step();
  for (size_t i = 0; i < embed.size(); ++i) EXPECT_EQ(finals[i], 1) << "input " << i;
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0) << "leaked blocks";
  out.stats = engine.stats();
  return out;
}

std::vector<float> solo(Loaded& m, const std::vector<int32_t>& p, Pooling pooling = Pooling::kMean) {
  return run_mixed(m, {p}, {}, solo_config(), pooling).vectors[0];
}

TEST(EmbeddingEngine, SameVectorAloneBatchedChunkedAndPreempted) {
  Loaded m = load("stories260K.gguf");
  const auto embed = make_prompts(*m.tok, 12);
  auto generate = make_prompts(*m.tok, 10);
  for (auto& g : generate) g.push_back(7);  // not the embeddings' prompts
  std::vector<std::vector<float>> alone;
  for (const auto& p : embed) {
    alone.push_back(solo(m, p));
    ASSERT_EQ(alone.back().size(), static_cast<size_t>(m.model->hparams().n_embd));
    double n2 = 0;
    for (float x : alone.back()) n2 += double(x) * x;
    EXPECT_NEAR(std::sqrt(n2), 1.0, 1e-6);
  }
  const auto solo_gen = run_all(m, generate, solo_config(), 12);

  EngineConfig batched;
  batched.num_blocks = 256;
  batched.scheduler.max_num_seqs = 64;
  batched.scheduler.max_batched_tokens = 300;
  Embedded together = run_mixed(m, embed, generate, batched);
  EXPECT_EQ(together.vectors, alone);
  EXPECT_EQ(together.generated, solo_gen) << "embeddings beside generations change nothing";

  batched.scheduler.max_batched_tokens = 7;  // every input over several steps
  Embedded chunked = run_mixed(m, embed, generate, batched);
  EXPECT_EQ(chunked.vectors, alone);
  EXPECT_EQ(chunked.generated, solo_gen);

  EngineConfig tight = batched;
  tight.num_blocks = 10;
  tight.scheduler.max_batched_tokens = 64;
  Embedded preempted = run_mixed(m, embed, generate, tight);
  EXPECT_GT(preempted.stats.preemptions, 0u);
  EXPECT_EQ(preempted.vectors, alone);
  EXPECT_EQ(preempted.generated, solo_gen);
}

TEST(EmbeddingEngine, PrefixCacheDoesNotStandInForRows) {
  Loaded m = load("stories260K.gguf");
  std::vector<int32_t> p = make_prompts(*m.tok, 1)[0];
  while (p.size() < 40) p.push_back(static_cast<int32_t>(5 + p.size()));
  const auto alone = solo(m, p);
  // The same prompt generated first fills the prefix cache with its blocks;
  // the embeddings of it (twice) still compute every position.
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.block_size = 16;
  cfg.prefix_caching = true;
  cfg.scheduler.max_num_seqs = 1;  // one after the other
  Embedded e = run_mixed(m, {p, p}, {p}, cfg);
  EXPECT_EQ(e.vectors[0], alone);
  EXPECT_EQ(e.vectors[1], alone);
}

TEST(EmbeddingEngine, PoolingsAndTheWholeContext) {
  Loaded m = load("stories260K.gguf");
  const auto p = make_prompts(*m.tok, 3)[2];
  const auto mean = solo(m, p, Pooling::kMean), cls = solo(m, p, Pooling::kCls),
             last = solo(m, p, Pooling::kLast);
  EXPECT_NE(mean, cls);
  EXPECT_NE(mean, last);
  // cls is the first position's row: a one-token input's every pooling.
  const std::vector<int32_t> first = {p[0]};
  EXPECT_EQ(solo(m, first, Pooling::kMean), cls);
  EXPECT_EQ(solo(m, first, Pooling::kLast), cls);
  // Causal attention: a row does not depend on the positions after it.
  std::vector<int32_t> longer = p;
  longer.push_back(9);
  EXPECT_EQ(solo(m, longer, Pooling::kCls), cls);
  EXPECT_NE(solo(m, longer, Pooling::kLast), last);

  // An embedding may fill the context (nothing is generated); one more is refused.
  EngineConfig cfg = solo_config();
  cfg.max_seq_len = 48;
  std::vector<int32_t> full(48, 5);
  full[0] = 1;
  EXPECT_EQ(run_mixed(m, {full}, {}, cfg).vectors[0].size(),
            static_cast<size_t>(m.model->hparams().n_embd));
  ThreadPool pool(1);
  Engine engine(*m.model, *m.tok, pool, cfg);
  Request r;
  r.prompt = full;
  r.prompt.push_back(5);
  r.embedding = true;
  EXPECT_THROW(engine.submit(r, {}), ConfigError);
  r.prompt = {1, 512};
  EXPECT_THROW(engine.submit(r, {}), ConfigError);
}

TEST(EmbeddingPooler, AgainstNaiveFloat64) {
  const int64_t E = 5, T = 7;
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> rows(static_cast<size_t>(E * T));
  for (float& x : rows) x = d(rng);
  for (Pooling pooling : {Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    std::vector<double> want(static_cast<size_t>(E), 0.0);
    for (int64_t j = 0; j < E; ++j) {
      if (pooling == Pooling::kMean) {
        for (int64_t t = 0; t < T; ++t) want[j] += rows[static_cast<size_t>(t * E + j)];
        want[j] /= T;
      } else {
        want[j] = rows[static_cast<size_t>((pooling == Pooling::kCls ? 0 : T - 1) * E + j)];
      }
    }
    double n = 0;
    for (double x : want) n += x * x;
    n = std::sqrt(n);
    // In chunks of 3, 1 and 3 rows; a preemption's restart in between.
    EmbeddingPooler p(pooling, E, T);
    p.add(0, rows.data(), 2);
    p.reset();
    p.add(0, rows.data(), 3);
    EXPECT_FALSE(p.complete());
    p.add(3, rows.data() + 3 * E, 1);
    p.add(4, rows.data() + 4 * E, 3);
    ASSERT_TRUE(p.complete());
    const auto got = p.result();
    for (int64_t j = 0; j < E; ++j) EXPECT_NEAR(got[j], want[j] / n, 1e-6) << pooling_name(pooling);
  }
  EmbeddingPooler p(Pooling::kMean, E, T);
  EXPECT_THROW(p.add(1, rows.data(), 1), Error);  // not from the next position
  EXPECT_THROW(p.add(0, rows.data(), T + 1), Error);
  EmbeddingPooler zero(Pooling::kMean, 2, 1);
  const float z[2] = {0.0f, 0.0f};
  zero.add(0, z, 1);
  EXPECT_EQ(zero.result(), std::vector<float>({0.0f, 0.0f}));
  EXPECT_EQ(parse_pooling("cls"), Pooling::kCls);
  EXPECT_FALSE(parse_pooling("none"));
  EXPECT_EQ(pooling_from_gguf(3), Pooling::kLast);
  EXPECT_FALSE(pooling_from_gguf(0));
  EXPECT_FALSE(pooling_from_gguf(4));
}

}  // namespace
}  // namespace pagellm
