// The engine on hybrid models (qwen35, qwen35moe: gated delta-net layers whose
// memory is a state per sequence, beside full attention): every request's
// tokens alone equal its tokens batched with others, in prompt chunks cut by
// the 64-token alignment and by other sequences' share of the step (tails of
// 1-3 tokens, under the conv kernel of 4), under preemption (the state is
// recomputed from zeros), with n > 1 samples forked from the prompt's state,
// and with the layers (and their states) split over virtual devices. Models
// are written by make-model once per run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "engine/engine_runner.h"
#include "engine/hybrid_models.h"
#include "engine/kv_runtime.h"
#include "model/make_model.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

// Prompts of 1 to 300 tokens: multiples of 64, one to three past them (the
// last chunk under the conv kernel), several 64-token chunks long.
std::vector<std::vector<int32_t>> hybrid_prompts(const Tokenizer& tok, int n) {
  const int lengths[] = {5, 64, 65, 66, 67, 130, 200, 257, 300, 17, 128, 191, 3, 70};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> id(3, tok.n_vocab() - 1);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p = {1};
    while (static_cast<int>(p.size()) < lengths[i % 14]) p.push_back(id(rng));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::vector<int32_t>> solo_runs(Loaded& m,
                                            const std::vector<std::vector<int32_t>>& prompts,
                                            int gen) {
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) solo.push_back(run_all(m, {p}, solo_config(), gen)[0]);
  return solo;
}

class HybridEngine : public ::testing::TestWithParam<const char*> {};

TEST_P(HybridEngine, BatchedChunkedAndPreemptedEqualAlone) {
  Loaded m = load(hybrid_model(GetParam()));
  ASSERT_TRUE(m.model->hparams().has_recurrent());
  const auto prompts = hybrid_prompts(*m.tok, 20);
  const int gen = 12;
  const auto solo = solo_runs(m, prompts, gen);

  EngineConfig cfg;
  cfg.num_blocks = 512;
  cfg.scheduler.max_num_seqs = 32;
  for (int32_t budget : {300, 100, 64}) {
    // 300: prompts share the step, so a chunk ends where another's began;
    // 100 and 64: the 64-token cuts, and 65..67-token prompts' 1..3-token tails.
    cfg.scheduler.max_batched_tokens = budget;
    EngineStats st;
    const auto together = run_all(m, prompts, cfg, gen, &st);
    EXPECT_EQ(st.preemptions, 0u);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(together[i], solo[i]) << "budget " << budget << ", request " << i << " ("
                                      << prompts[i].size() << " prompt tokens)";
  }

  // A cache too small for all at once: sequences are preempted, their slots
  // freed, and recomputed from zeros later.
  EngineConfig tight = cfg;
  tight.num_blocks = 40;
  tight.scheduler.max_batched_tokens = 128;
  EngineStats st;
  const auto preempted = run_all(m, prompts, tight, gen, &st);
  EXPECT_GT(st.preemptions, 0u);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(preempted[i], solo[i]) << "request " << i;
}

// n > 1: samples forked from the prompt's state give the tokens of separate
// requests with the samples' seeds (index i: seed + i * 0x9e3779b97f4a7c15).
TEST_P(HybridEngine, ForkedSamplesEqualSeparateRequests) {
  Loaded m = load(hybrid_model(GetParam()));
  const auto prompts = hybrid_prompts(*m.tok, 9);
  Request r;
  r.prompt = prompts[7];  // 257 tokens: several chunks before the fork
  r.max_tokens = 10;
  r.ignore_eos = true;
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0;
  r.sampling.seed = 11;
  const int n = 3;
  auto run = [&](const std::vector<Request>& reqs, EngineConfig cfg) {
    ThreadPool pool(2);
    Engine engine(*m.model, *m.tok, pool, cfg);
    std::map<std::pair<uint64_t, int>, std::vector<int32_t>> outs;
    std::vector<uint64_t> ids;
    for (const Request& q : reqs)
      ids.push_back(engine.submit(q, [&outs](const SeqEvent& ev) {
        if (ev.token >= 0) outs[{ev.request_id, ev.index}].push_back(ev.token);
      }));
    while (engine.has_work()) engine.step();
    EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0);
    std::vector<std::vector<int32_t>> res;
    for (uint64_t id : ids)
      for (int i = 0; i < n; ++i)
        if (outs.count({id, i})) res.push_back(outs[{id, i}]);
    return res;
  };
  EngineConfig cfg;
  cfg.num_blocks = 128;
  cfg.scheduler.max_num_seqs = 8;
  Request forked = r;
  forked.n = n;
  const auto got = run({forked}, cfg);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  std::vector<Request> separate;
  for (int i = 0; i < n; ++i) {
    Request q = r;
    q.sampling.seed = r.sampling.seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
    separate.push_back(q);
  }
  for (int i = 0; i < n; ++i) {
    const auto alone = run({separate[static_cast<size_t>(i)]}, solo_config());
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(got[static_cast<size_t>(i)], alone[0]) << "sample " << i;
  }
  EXPECT_NE(got[0], got[1]);  // the samples differ: the test sees sampling
}

// Layers split over virtual devices, each recurrent layer's state in its
// device's pool: the tokens of one device, batched and under preemption.
TEST_P(HybridEngine, LayersSplitOverDevicesKeepTheirStates) {
  Loaded m = load(hybrid_model(GetParam()));
  const int32_t L = m.model->hparams().n_layer;
  const auto prompts = hybrid_prompts(*m.tok, 20);
  const int gen = 10;
  const auto solo = solo_runs(m, prompts, gen);
  const std::vector<std::vector<KvPoolPlacement>> splits = {
      {{"cpu:0", 0, L / 2}, {"host", L / 2, L}},
      {{"cpu:0", 0, 1}, {"cpu:1", 1, L - 1}, {"host", L - 1, L}}};
  for (const auto& placements : splits) {
    m.model->place(placements);
    EngineConfig cfg;
    cfg.num_blocks = 40;  // tight: forces preemption
    cfg.scheduler.max_batched_tokens = 128;
    {
      // Each device's state pool holds exactly its recurrent layers.
      KvRuntime rt(*m.model, cfg.kv_runtime(*m.model));
      size_t pooled = 0;
      for (const auto& pool : rt.storage().state_pools()) {
        ASSERT_FALSE(pool->shape().layers.empty());
        const int32_t first = pool->shape().layers.front();
        const KvPoolPlacement* home = nullptr;
        for (const auto& p : placements)
          if (first >= p.layer_begin && first < p.layer_end) home = &p;
        ASSERT_NE(home, nullptr);
        for (int32_t l : pool->shape().layers) {
          EXPECT_TRUE(l >= home->layer_begin && l < home->layer_end) << home->device << " " << l;
          EXPECT_TRUE(m.model->hparams().layers[static_cast<size_t>(l)].recurrent);
        }
        pooled += pool->shape().layers.size();
      }
      EXPECT_EQ(pooled, static_cast<size_t>(m.model->hparams().n_recurrent()));
    }
    EngineStats st;
    const auto got = run_all(m, prompts, cfg, gen, &st);
    EXPECT_GT(st.preemptions, 0u);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(got[i], solo[i]) << placements.size() << " devices, request " << i;
  }
  m.model->place({{"host", 0, L}});
}

INSTANTIATE_TEST_SUITE_P(Arch, HybridEngine, ::testing::Values("qwen35", "qwen35moe"));

TEST(HybridEngineConfig, RefusesSpeculationAndSmallStepBudgets) {
  Loaded m = load(hybrid_model("qwen35"));
  ThreadPool pool(2);
  EngineConfig spec;
  spec.speculation.ngram = 3;
  try {
    Engine e(*m.model, *m.tok, pool, spec);
    ADD_FAILURE() << "speculation accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("speculative decoding is not supported for qwen35"),
              std::string::npos)
        << e.what();
  }
  EngineConfig small;
  small.scheduler.max_batched_tokens = 63;
  try {
    Engine e(*m.model, *m.tok, pool, small);
    ADD_FAILURE() << "63-token steps accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-batched-tokens must be at least 64"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pagellm
