// Constrained decoding in the engine: sampled replies follow the grammar
// (each of n samples with its own matcher), and the tokens do not depend on
// batching, chunking or preemption.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/engine.h"
#include "engine_runner.h"
#include "grammar/grammar_matcher.h"

namespace pagellm {
namespace {

using namespace test;

const char* const kListGrammar = R"G(
root ::= "[" item ("," " "? item){0,4} "]"
item ::= "\"" [a-z ]{1,12} "\"" | [0-9]{1,3}
)G";

struct Reply {
  std::string text;
  FinishReason reason = FinishReason::kNone;
  std::vector<int32_t> ids;
};

std::vector<Reply> run(Loaded& m, const std::vector<std::vector<int32_t>>& prompts, EngineConfig cfg,
                       const std::shared_ptr<const Grammar>& g, float temperature, int n = 1,
                       EngineStats* stats = nullptr, uint64_t seed0 = 100) {
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  std::map<std::pair<uint64_t, int32_t>, Reply> out;
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.sampling.temperature = temperature;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = seed0 + i;
    r.max_tokens = 80;
    r.n = n;
    r.grammar = g;
    ids.push_back(engine.submit(r, [&out](const SeqEvent& ev) {
      Reply& rep = out[{ev.request_id, ev.index}];
      rep.text += ev.text;
      if (ev.token >= 0) rep.ids.push_back(ev.token);
      if (ev.finished) rep.reason = ev.finish_reason;
    }));
  }
  while (engine.has_work()) engine.step();
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0) << "leaked blocks";
  if (stats) *stats = engine.stats();
  std::vector<Reply> res;
  for (uint64_t id : ids)
    for (int32_t k = 0; k < n; ++k) res.push_back(out[{id, k}]);
  return res;
}

TEST(GrammarEngine, SampledRepliesFollowTheGrammar) {
  Loaded m = load("stories260K.gguf");
  const auto g = Grammar::parse(kListGrammar);
  auto prompts = make_prompts(*m.tok, 8);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  int complete = 0;
  for (const Reply& r : run(m, prompts, cfg, g, 1.0f, /*n=*/3)) {
    if (r.reason == FinishReason::kStop) {
      EXPECT_TRUE(grammar_accepts(g, r.text)) << r.text;
      ++complete;
    } else {
      ASSERT_EQ(r.reason, FinishReason::kLength) << r.text;
      GrammarMatcher mt(g);
      EXPECT_TRUE(mt.advance(r.text)) << r.text;  // a valid prefix, cut by max_tokens
    }
  }
  EXPECT_GT(complete, 12);  // of 24 samples, most close their list
}

TEST(GrammarEngine, TokensDoNotDependOnBatchingOrPreemption) {
  Loaded m = load("stories260K.gguf");
  const auto g = Grammar::parse(kListGrammar);
  auto prompts = make_prompts(*m.tok, 10);
  std::vector<std::vector<int32_t>> solo;
  for (size_t i = 0; i < prompts.size(); ++i)
    solo.push_back(run(m, {prompts[i]}, solo_config(), g, 0.9f, 1, nullptr, 100 + i)[0].ids);
  EngineConfig tight;
  tight.num_blocks = 10;  // preemption and recompute
  tight.scheduler.max_batched_tokens = 24;  // chunked prompts
  EngineStats st;
  const auto together = run(m, prompts, tight, g, 0.9f, 1, &st);
  EXPECT_GT(st.preemptions, 0u);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i].ids, solo[i]) << i;
}

TEST(GrammarEngine, MasksPreparedDuringTheForwardPassGiveTheSameTokens) {
  // The same load with the masks computed on the engine's mask worker while
  // the forward pass runs and while drawing
  // (PAGELLM_MASK_PREFETCH=1 and 0): the same tokens, n = 2 samples forking
  // from each prompt included; and every sequence follows the grammar.
  Loaded m = load("stories260K.gguf");
  const auto g = Grammar::parse(kListGrammar);
  auto prompts = make_prompts(*m.tok, 12);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  ::setenv("PAGELLM_MASK_PREFETCH", "1", 1);
  const auto prepared = run(m, prompts, cfg, g, 0.9f, 2);
  ::setenv("PAGELLM_MASK_PREFETCH", "0", 1);
  const auto plain = run(m, prompts, cfg, g, 0.9f, 2);
  ::unsetenv("PAGELLM_MASK_PREFETCH");
  ASSERT_EQ(prepared.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(prepared[i].ids, plain[i].ids) << i;
    GrammarMatcher mt(g);
    EXPECT_TRUE(mt.advance(prepared[i].text)) << prepared[i].text;
  }
}

TEST(GrammarEngine, GreedyFollowsALiteralGrammar) {
  Loaded m = load("stories260K.gguf");
  const auto g = Grammar::parse("root ::= \"Tom and Sue \" (\"ran\" | \"sat\") \".\"");
  auto prompts = make_prompts(*m.tok, 2);
  EngineConfig cfg;
  for (const Reply& r : run(m, prompts, cfg, g, 0.0f)) {
    EXPECT_EQ(r.reason, FinishReason::kStop);
    EXPECT_TRUE(r.text == "Tom and Sue ran." || r.text == "Tom and Sue sat.") << r.text;
  }
}

}  // namespace
}  // namespace pagellm
