// Sliding-window KV groups in the engine (kvcache/kv_group.h): the window
// groups hold only the blocks a window needs, and the tokens are those of a
// run that keeps every block.
#include <gtest/gtest.h>

#include "engine/engine_runner.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

// Greedy tokens of one long request, checking the groups' block counts after
// every step against the positions each group must keep.
std::vector<int32_t> run_checking_blocks(Loaded& m, const std::vector<int32_t>& prompt, int gen,
                                         EngineConfig cfg, int32_t* peak_window_blocks) {
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  const KvCacheManager& kv = engine.kv_manager();
  std::vector<int32_t> out;
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.max_tokens = gen;
  r.ignore_eos = true;
  engine.submit(r, [&](const SeqEvent& ev) {
    if (ev.token >= 0) out.push_back(ev.token);
  });
  const int32_t bs = cfg.block_size;
  *peak_window_blocks = 0;
  while (engine.has_work()) {
    engine.step();
    if (!engine.has_work()) break;
    // One request, no preemption: every token run is a computed position.
    const int64_t computed = static_cast<int64_t>(engine.stats().tokens_computed);
    EXPECT_EQ(kv.allocator(0).num_used(), (computed + bs - 1) / bs);
    for (int32_t g = 1; g < kv.n_groups(); ++g) {
      const int64_t first = std::max<int64_t>(0, computed - kv.window(g) + 1);
      const int64_t need = computed > first ? (computed - 1) / bs - first / bs + 1 : 0;
      EXPECT_EQ(kv.allocator(g).num_used(), need) << "group " << g << " at " << computed;
      *peak_window_blocks = std::max(*peak_window_blocks, kv.allocator(g).num_used());
    }
  }
  EXPECT_EQ(kv.num_used_all(), 0) << "leaked blocks";
  return out;
}

class WindowGroups : public ::testing::TestWithParam<const char*> {};

TEST_P(WindowGroups, FreeBlocksOutOfTheWindowAndKeepTheTokens) {
  Loaded m = load(GetParam());
  ASSERT_GT(m.model->kv_groups().n_groups(), 1);
  std::vector<int32_t> prompt = m.tok->encode("Once upon a time there was a little girl");
  for (int i = 0; prompt.size() < 100; ++i) prompt.push_back(3 + (i * 37) % 500);
  EngineConfig cfg = solo_config();
  cfg.num_blocks = 20;
  cfg.scheduler.max_batched_tokens = 24;  // chunked prefill across the window
  int32_t peak = 0, peak_full = 0;
  const auto with_groups = run_checking_blocks(m, prompt, 120, cfg, &peak);
  cfg.window_kv_groups = false;
  const auto without = run_checking_blocks(m, prompt, 120, cfg, &peak_full);
  EXPECT_EQ(with_groups, without);
  EXPECT_EQ(with_groups.size(), 120u);
  // 219 positions need 14 blocks of 16; a window of 32 at most 4.
  EXPECT_LE(peak, 4);
  std::printf("%s: window group peak %d blocks, full group %d\n", GetParam(), peak,
              static_cast<int32_t>((prompt.size() + 120 + 15) / 16));
}

INSTANTIATE_TEST_SUITE_P(Gemma, WindowGroups,
                         ::testing::Values("golden/arch/rand-gemma3-tok512-Q8_0.gguf",
                                           "golden/arch/rand-gemma2-tok512-Q8_0.gguf"),
                         [](const auto& info) {
                           return std::string(info.index == 0 ? "gemma3" : "gemma2");
                         });

TEST(WindowGroups, PoolsAreSizedPerGroup) {
  Loaded m = load("golden/arch/rand-gemma3-tok512-Q8_0.gguf");
  ThreadPool pool(1);
  EngineConfig cfg;
  cfg.num_blocks = 256;
  cfg.scheduler.max_num_seqs = 4;
  cfg.scheduler.max_batched_tokens = 64;
  Engine engine(*m.model, *m.tok, pool, cfg);
  const KvCacheManager& kv = engine.kv_manager();
  ASSERT_EQ(kv.n_groups(), 2);
  EXPECT_EQ(kv.window(1), 32);
  EXPECT_EQ(kv.allocator(0).num_blocks(), 256);
  EXPECT_EQ(kv.allocator(1).num_blocks(), window_group_blocks(32, 16, 4, 64, 256));
  EXPECT_FALSE(kv.prefix_caching());
}

}  // namespace
}  // namespace pagellm
