// One path from the plan to the caches (engine/kv_runtime.h): the plan sizes
// every KV group once, EngineConfig::from_plan carries the counts, and the
// engine, a pipeline stage and the draft model build their caches from them.
#include "engine/kv_runtime.h"

#include <gtest/gtest.h>

#include "engine/engine_runner.h"
#include "gguf/gguf_reader.h"
#include "planner/planner.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

// A plan of the file on a host with room to spare, for `seqs` sequences of
// steps of up to `tokens` tokens.
Plan plan_of(const std::string& rel, int32_t seqs, int32_t tokens, int64_t kv_tokens) {
  auto file = GgufFile::open(data_path(rel));
  const ModelHParams hp = ModelHParams::from_gguf(*file);
  FootprintOptions fo;
  fo.max_batched_tokens = tokens;
  fo.max_num_seqs = seqs;
  PlanRequest req;
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = kv_tokens;
  req.max_seq_len = 256;
  req.max_num_seqs = seqs;
  return make_plan(req, model_footprint(*file, hp, fo),
                   {PlanDevice{Device::host(), uint64_t{8} << 30, uint64_t{1} << 30}});
}

// Blocks a window group needs, written out from its definition
// (kvcache/kv_group.h): per running sequence the blocks of W - 1 positions
// behind a step plus two partial ones, plus a step's tokens in blocks.
int64_t window_need(int64_t w, int64_t bs, int64_t seqs, int64_t tokens) {
  int64_t per_seq = 0;
  while (per_seq * bs < w - 1) ++per_seq;
  int64_t step = 0;
  while (step * bs < tokens) ++step;
  return seqs * (per_seq + 2) + step;
}

TEST(KvRuntime, EngineFromPlanHasThePlansGroupBlocks) {
  const char* rel = "golden/arch/rand-gemma3-tok512-Q8_0.gguf";
  for (const int64_t kv_tokens : {int64_t{4096}, int64_t{160}}) {
    const Plan plan = plan_of(rel, 4, 64, kv_tokens);
    ASSERT_EQ(plan.kv_groups.size(), 2u);
    EXPECT_EQ(plan.kv_groups[0].blocks, plan.num_blocks);
    const int64_t need = window_need(plan.kv_groups[1].window, 16, 4, 64);
    EXPECT_EQ(plan.kv_groups[1].blocks, std::min<int64_t>(need, plan.num_blocks)) << kv_tokens;
    EXPECT_EQ(plan.kv_groups[1].tokens, int64_t{plan.kv_groups[1].blocks} * 16);

    Loaded m = load(rel);
    ThreadPool pool(1);
    RunOptions run;
    run.max_batched_tokens = 64;
    run.prefix_caching = false;
    const EngineConfig cfg = EngineConfig::from_plan(plan, run);
    Engine engine(*m.model, *m.tok, pool, cfg);
    const KvCacheManager& kv = engine.kv_manager();
    ASSERT_EQ(kv.n_groups(), 2);
    for (int32_t g = 0; g < 2; ++g)
      EXPECT_EQ(kv.allocator(g).num_blocks(), plan.kv_groups[static_cast<size_t>(g)].blocks) << g;
    EXPECT_EQ(kv.window(1), plan.kv_groups[1].window);
    EXPECT_FALSE(kv.prefix_caching());
    // A pipeline stage builds the same groups from the same config.
    KvRuntime stage(*m.model, cfg.kv_runtime(*m.model));
    EXPECT_EQ(stage.group_blocks(),
              (std::vector<int32_t>{plan.kv_groups[0].blocks, plan.kv_groups[1].blocks}));
  }
}

TEST(KvRuntime, RefusesGroupsTheModelDoesNotHave) {
  Loaded m = load("stories260K.gguf");  // no sliding windows
  KvRuntimeConfig kc;
  kc.groups = {{CacheGroupSpec::Kind::kPagedKv, 0, 8}, {CacheGroupSpec::Kind::kPagedKv, 32, 4}};
  EXPECT_THROW(KvRuntime(*m.model, kc), ConfigError);
  kc.groups = {{CacheGroupSpec::Kind::kPagedKv, 0, 0}};
  EXPECT_THROW(KvRuntime(*m.model, kc), ConfigError);
  kc.groups = {{CacheGroupSpec::Kind::kPagedKv, 0, 8}};
  KvRuntime ok(*m.model, kc);
  EXPECT_EQ(ok.manager().allocator().num_blocks(), 8);
  EXPECT_EQ(ok.storage().pools().size(), m.model->placements().size());
}

TEST(KvRuntime, OneGroupWhenWindowsAreNotKept) {
  Loaded m = load("golden/arch/rand-gemma3-tok512-Q8_0.gguf");
  const KvGroups groups = m.model->kv_groups();
  ASSERT_EQ(groups.n_groups(), 2);
  EXPECT_EQ(cache_groups(groups, {20, 7}, /*by_window=*/false).size(), 1u);
  const auto specs = cache_groups(groups, {20, 7});
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[1].window, groups.windows[1]);
  EXPECT_EQ(specs[1].num_blocks, 7);
  EXPECT_THROW(cache_groups(groups, {20}), ConfigError);  // a window group without a count
}

}  // namespace
}  // namespace pagellm
