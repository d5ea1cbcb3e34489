// The prefix cache's host tier under the engine: a prompt repeated after its
// blocks were evicted from the pool (by a flood of other prompts) is restored
// from the host tier (its blocks copied there during forward passes before
// they were evicted), gives the tokens of a run without any cache, and counts
// host hits; the same with the pool in a device's memory (the staged CPU
// backend standing in for a GPU: the tier's memory is that backend's host
// allocation); models that keep no whole prefix go without, with a note.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine_runner.h"

namespace pagellm::test {
namespace {

std::vector<int32_t> long_prompt(const Tokenizer& tok) {
  return tok.encode(
      "Once upon a time, in a small town near the sea, there lived a little girl named Mia. Mia "
      "had a red kite that she loved more than anything. Every morning she ran to the beach with "
      "her dog Max, and they played in the sand until the sun was high. One day a big wind came "
      "and took the kite far away over the water.");
}

// Runs `prompts` one after another through one engine; each one's tokens.
std::vector<std::vector<int32_t>> run_in_turn(Loaded& m, const std::vector<std::vector<int32_t>>& prompts,
                                              const EngineConfig& cfg, int gen, EngineStats& st) {
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : prompts) out.push_back(run_greedy(engine, p, gen));
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0) << "leaked blocks";
  st = engine.stats();
  return out;
}

// `ahead`: the pool is in host memory, so the blocks the pool evicts next are
// copied by the tier's worker during the forward pass.
void check_repeat_after_eviction(Loaded& m, const std::string& what, bool ahead) {
  const auto p = long_prompt(*m.tok);
  ASSERT_GT(p.size(), 64u);
  const uint64_t full = (p.size() - 1) / 16;  // blocks a repeat can reuse
  const int gen = 12;
  const auto want = run_all(m, {p}, solo_config(), gen)[0];
  // Other prompts, each as long as the pool: every cached block of p is evicted.
  EngineConfig cfg;
  cfg.num_blocks = static_cast<int32_t>((p.size() + gen) / 16 + 2);
  cfg.host_tier.max_bytes = 8 << 20;
  std::vector<std::vector<int32_t>> flood;
  for (int k = 0; k < 3; ++k) {
    auto f = p;
    for (auto& t : f) t = 3 + (t * 7 + k * 13) % (m.tok->n_vocab() - 3);
    flood.push_back(f);
  }
  EngineStats st;
  const auto got = run_in_turn(m, {p, flood[0], flood[1], flood[2], p}, cfg, gen, st);
  EXPECT_EQ(got.front(), want) << what;
  EXPECT_EQ(got.back(), want) << what;
  EXPECT_TRUE(st.host_tier) << what;
  EXPECT_GE(st.host.hits, full) << what;
  EXPECT_GE(st.cached_prompt_tokens, full * 16) << what;
  EXPECT_GT(st.blocks.evictions, 0u) << what;
  EXPECT_LE(st.host.held_bytes, st.host.capacity_bytes) << what;
  if (ahead) {
    EXPECT_GT(st.host.stored_ahead, 0u) << what;
  } else {
    EXPECT_EQ(st.host.stored_ahead, 0u) << what;
    EXPECT_EQ(st.restores_overlapped, 0u) << what;  // a device pool's copies go on its stream
  }
}

TEST(EngineHostTier, RepeatedPromptAfterEvictionIsRestoredFromHost) {
  Loaded m = load("stories260K.gguf");
  check_repeat_after_eviction(m, "host pool", true);
}

TEST(EngineHostTier, DevicePoolUsesTheBackendsHostMemory) {
  Loaded m = load_on_staged_device("stories260K.gguf", "cpu:1");
  check_repeat_after_eviction(m, "staged cpu:1 pool", false);
  ThreadPool pool(1);
  EngineConfig cfg;
  cfg.num_blocks = 16;
  cfg.host_tier.max_bytes = 1 << 20;
  Engine e(*m.model, *m.tok, pool, cfg);
  EXPECT_TRUE(e.stats().host.pinned);
}

// Preemption by swap: long sequences in a pool too small for them all are
// preempted; their full blocks (prompt and output) go to the host tier as
// the pool evicts them and come back when they resume. The tokens are the
// solo runs', and fewer tokens are computed than with recompute alone.
TEST(EngineHostTier, PreemptedSequencesResumeFromTheHostTier) {
  Loaded m = load("stories260K.gguf");
  const auto base = long_prompt(*m.tok);
  std::vector<std::vector<int32_t>> prompts;
  for (int k = 0; k < 4; ++k) {
    auto p = base;
    p[0] = 3 + k;  // no prefix shared between them
    prompts.push_back(p);
  }
  const int gen = 40;
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) solo.push_back(run_all(m, {p}, solo_config(), gen)[0]);
  EngineConfig tight;
  tight.num_blocks = static_cast<int32_t>((base.size() + gen) / 16 + 3);
  tight.scheduler.max_batched_tokens = 32;
  EngineStats recompute, swap;
  const auto got_recompute = run_all(m, prompts, tight, gen, &recompute);
  tight.host_tier.max_bytes = 8 << 20;
  const auto got_swap = run_all(m, prompts, tight, gen, &swap);
  EXPECT_GT(swap.preemptions, 0u);
  EXPECT_GT(swap.host.hits, 0u);
  // Resumed beside running sequences: their blocks came in during their passes.
  EXPECT_GT(swap.restores_overlapped, 0u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got_recompute[i], solo[i]) << "request " << i;
    EXPECT_EQ(got_swap[i], solo[i]) << "request " << i;
  }
  // Same work asked for; what came back from the host was not computed again.
  EXPECT_LT(swap.tokens_computed, recompute.tokens_computed);
  std::printf("preemptions %llu/%llu; tokens computed with swap %llu, recompute only %llu; %llu "
              "blocks back from the host\n",
              static_cast<unsigned long long>(swap.preemptions),
              static_cast<unsigned long long>(recompute.preemptions),
              static_cast<unsigned long long>(swap.tokens_computed),
              static_cast<unsigned long long>(recompute.tokens_computed),
              static_cast<unsigned long long>(swap.host.hits));
}

TEST(EngineHostTier, WithoutPrefixCacheThereIsNoTier) {
  Loaded m = load("stories260K.gguf");
  ThreadPool pool(1);
  EngineConfig cfg;
  cfg.num_blocks = 16;
  cfg.prefix_caching = false;
  cfg.host_tier.max_bytes = 1 << 20;
  testing::internal::CaptureStderr();
  Engine e(*m.model, *m.tok, pool, cfg);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(e.stats().host_tier);
  EXPECT_NE(err.find("--cache-host is not used: the prefix cache is off"), std::string::npos) << err;
}

}  // namespace
}  // namespace pagellm::test
