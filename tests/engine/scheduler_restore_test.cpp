// Deferred restores as the scheduler sees them, without a model: a prompt
// whose cached blocks come from a tier beyond the pool is admitted but not
// computed on until the copies into its blocks have run; a prompt that
// shares such a block waits too; giving the blocks back first completes the
// copies, so that no block is reused while one is copied into it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>

#include "engine/scheduler.h"

namespace pagellm {
namespace {

constexpr int32_t kBlock = 16;

// A tier that holds every block committed to it (by its tokens) and hands
// back each restore as a copy that records the block it filled.
struct DeferringTier final : PrefixTier {
  void committed(int32_t, int32_t, std::span<const int32_t> tokens) override {
    held[{tokens.begin(), tokens.end()}] = true;
  }
  bool fetch(int32_t, std::span<const int32_t> tokens) override {
    return held.count({tokens.begin(), tokens.end()}) > 0;
  }
  RestoreCopy place(int32_t block) override {
    ++placed;
    return [this, block] { filled.push_back(block); };
  }
  void restores_done() override { ++done_calls; }

  std::map<std::vector<int32_t>, bool> held;
  std::vector<int32_t> filled;  // blocks whose copy ran
  int placed = 0, done_calls = 0;
};

std::unique_ptr<Sequence> make_seq(uint64_t id, int n_prompt, int first_token = 0) {
  std::vector<int32_t> p(static_cast<size_t>(n_prompt));
  std::iota(p.begin(), p.end(), first_token);
  return std::make_unique<Sequence>(id, p, n_prompt + 20, kBlock);
}

bool is_scheduled(const SchedulerOutput& out, const Sequence* s) {
  return std::any_of(out.scheduled.begin(), out.scheduled.end(),
                     [s](const ScheduledSeq& sc) { return sc.seq == s; });
}

// Computes `s`'s whole prompt alone, then finishes it: its full blocks are
// committed to the tier and left in the pool's cache.
void prefill_and_finish(Scheduler& sched, Sequence* s) {
  sched.add(s);
  while (s->n_computed < s->n_prompt) {
    auto out = sched.schedule();
    ASSERT_TRUE(is_scheduled(out, s));
    sched.update_after_step(out);
  }
  sched.finish(s);
}

// Evicts every cached block of the pool by filling it with other tokens.
void flood(Scheduler& sched, int n_prompt, int first_token) {
  auto f = make_seq(99, n_prompt, first_token);
  prefill_and_finish(sched, f.get());
}

struct Fixture {
  Fixture() : kv(8, kBlock, true), sched({.max_num_seqs = 4, .max_batched_tokens = 512}, kv) {
    kv.set_prefix_tier(&tier);
    kv.set_deferred_restores(true);
  }
  DeferringTier tier;
  KvCacheManager kv;
  Scheduler sched;
};

// A prompt of `n_prompt` tokens (ids from 0) computed and finished, then
// evicted from the pool by a flood: its full blocks are in the tier only.
void compute_and_evict(Fixture& f, int n_prompt) {
  auto a = make_seq(1, n_prompt);
  prefill_and_finish(f.sched, a.get());
  flood(f.sched, 8 * kBlock - 1, 1000);
  const auto first = std::span(a->tokens).first(kBlock);
  ASSERT_FALSE(f.kv.allocator().find(BlockAllocator::chain_hash(0, first), first));
}

TEST(SchedulerRestore, APromptRestoredFromATierRunsTheStepAfterItsCopies) {
  Fixture f;
  compute_and_evict(f, 4 * kBlock + 3);

  auto b = make_seq(2, 4 * kBlock + 3);  // the evicted prompt again
  f.sched.add(b.get());
  auto out = f.sched.schedule();
  EXPECT_FALSE(is_scheduled(out, b.get()));
  ASSERT_EQ(out.restoring.size(), 1u);
  EXPECT_EQ(out.restoring[0], b.get());
  EXPECT_EQ(b->n_computed, 4 * kBlock);  // its cached part, once the copies have run
  EXPECT_EQ(f.tier.placed, 4);
  EXPECT_TRUE(f.kv.restoring(b->blocks));
  EXPECT_TRUE(f.tier.filled.empty()) << "copies run only when the engine starts them";

  // Until they run, it is not computed on, whatever the steps.
  out = f.sched.schedule();
  EXPECT_FALSE(is_scheduled(out, b.get()));

  f.kv.start_restores();
  f.kv.complete_restores();
  EXPECT_FALSE(f.kv.restoring(b->blocks));
  // Its 4 cached blocks were filled; a fifth is reserved for the rest.
  ASSERT_EQ(b->blocks.blocks().size(), 5u);
  std::vector<int32_t> filled = f.tier.filled;
  std::vector<int32_t> blocks(b->blocks.blocks().begin(), b->blocks.blocks().begin() + 4);
  std::sort(filled.begin(), filled.end());
  std::sort(blocks.begin(), blocks.end());
  EXPECT_EQ(filled, blocks);
  EXPECT_EQ(f.tier.done_calls, 1);
  EXPECT_EQ(f.kv.restores_overlapped(), 4u);

  out = f.sched.schedule();
  ASSERT_TRUE(is_scheduled(out, b.get()));
  EXPECT_EQ(out.scheduled[0].n_tokens, 3);  // only what no tier held
}

TEST(SchedulerRestore, APromptSharingABlockBeingCopiedInWaitsToo) {
  Fixture f;
  compute_and_evict(f, 2 * kBlock + 1);
  auto b = make_seq(2, 2 * kBlock + 1);
  auto c = make_seq(3, 2 * kBlock + 1);  // the same prompt, in the same step
  f.sched.add(b.get());
  f.sched.add(c.get());
  auto out = f.sched.schedule();
  EXPECT_EQ(f.tier.placed, 2);  // c takes b's blocks from the pool, not again from the tier
  EXPECT_EQ(out.restoring.size(), 2u);
  EXPECT_FALSE(is_scheduled(out, b.get()));
  EXPECT_FALSE(is_scheduled(out, c.get()));
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(b->blocks.blocks()[i], c->blocks.blocks()[i]);
  f.kv.complete_restores();  // no worker started: they run here
  out = f.sched.schedule();
  EXPECT_TRUE(is_scheduled(out, b.get()));
  EXPECT_TRUE(is_scheduled(out, c.get()));
}

TEST(SchedulerRestore, GivingBackABlockBeingCopiedInCompletesTheCopyFirst) {
  Fixture f;
  compute_and_evict(f, 2 * kBlock + 1);
  auto b = make_seq(2, 2 * kBlock + 1);
  f.sched.add(b.get());
  f.sched.schedule();
  ASSERT_TRUE(f.kv.restoring(b->blocks));
  f.sched.finish(b.get());  // e.g. the request was cancelled
  EXPECT_EQ(f.tier.filled.size(), 2u);
  EXPECT_FALSE(f.kv.has_pending_restores());
  EXPECT_EQ(f.kv.allocator().num_used(), 0) << "leaked blocks";
}

// Admitted with room for its first chunk, as any prompt: one without it
// gives its blocks back (their copies run first) and waits, and nothing is
// preempted for it the step after.
TEST(SchedulerRestore, APromptWithoutRoomForItsFirstChunkWaits) {
  Fixture f;
  compute_and_evict(f, 4 * kBlock + 3);
  auto x = make_seq(3, 4 * kBlock - 2, 2000);  // runs on, holding 4 of the 8 blocks
  f.sched.add(x.get());
  auto out = f.sched.schedule();
  ASSERT_TRUE(is_scheduled(out, x.get()));
  f.sched.update_after_step(out);
  x->tokens.push_back(7);  // sampled: it decodes from now on

  auto b = make_seq(2, 4 * kBlock + 3);  // a's prompt: 4 blocks from the tier and 1 more
  f.sched.add(b.get());
  out = f.sched.schedule();
  EXPECT_TRUE(out.restoring.empty());
  EXPECT_FALSE(is_scheduled(out, b.get()));
  ASSERT_FALSE(f.sched.waiting().empty());
  EXPECT_EQ(f.sched.waiting().front(), b.get());
  EXPECT_FALSE(f.kv.has_pending_restores()) << "its blocks were given back, their copies run";
  EXPECT_EQ(f.tier.filled.size(), static_cast<size_t>(f.tier.placed));
  f.sched.update_after_step(out);
  x->tokens.push_back(7);
  out = f.sched.schedule();
  EXPECT_TRUE(out.preempted.empty());
  EXPECT_TRUE(is_scheduled(out, x.get()));
}

TEST(SchedulerRestore, WithoutDeferralTheCopiesRunAtTheMatch) {
  Fixture f;
  f.kv.set_deferred_restores(false);
  compute_and_evict(f, 2 * kBlock + 1);
  auto b = make_seq(2, 2 * kBlock + 1);
  f.sched.add(b.get());
  auto out = f.sched.schedule();
  EXPECT_TRUE(out.restoring.empty());
  EXPECT_TRUE(is_scheduled(out, b.get()));
  EXPECT_EQ(f.tier.filled.size(), 2u);
  EXPECT_EQ(f.kv.restores_overlapped(), 0u);
}

}  // namespace
}  // namespace pagellm
