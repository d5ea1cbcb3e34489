// The scheduler as a pure step, without a model.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "util/error.h"

namespace pagellm {
namespace {

std::unique_ptr<Sequence> make_seq(uint64_t id, int n_prompt, int max_new = 100,
                                   int first_token = 0) {
  std::vector<int32_t> p(static_cast<size_t>(n_prompt));
  std::iota(p.begin(), p.end(), first_token);
  return std::make_unique<Sequence>(id, p, n_prompt + max_new, 16);
}

// Simulates the engine: after a step, sequences that reached the end of their
// tokens "sample" one more token.
void complete_step(Scheduler& s, const SchedulerOutput& out) {
  s.update_after_step(out);
  for (const auto& sc : out.scheduled)
    if (sc.seq->n_computed == static_cast<int64_t>(sc.seq->tokens.size()))
      sc.seq->tokens.push_back(7);
}

TEST(Scheduler, ChunkedPrefillWithinTokenBudget) {
  KvCacheManager kv(64, 16, false);
  Scheduler s({.max_num_seqs = 8, .max_batched_tokens = 40}, kv);
  auto a = make_seq(1, 100);
  s.add(a.get());
  std::vector<int64_t> chunks;
  while (a->n_generated() == 0) {
    auto out = s.schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    EXPECT_LE(out.n_tokens(), 40);
    chunks.push_back(out.scheduled[0].n_tokens);
    complete_step(s, out);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{40, 40, 20}));
  auto out = s.schedule();  // now a decode
  EXPECT_EQ(out.scheduled[0].n_tokens, 1);
}

TEST(Scheduler, DecodesFirstThenFcfsAdmissionUnderBudgets) {
  KvCacheManager kv(64, 16, false);
  Scheduler s({.max_num_seqs = 3, .max_batched_tokens = 50}, kv);
  auto a = make_seq(1, 10), b = make_seq(2, 30), c = make_seq(3, 30), d = make_seq(4, 5);
  s.add(a.get());
  complete_step(s, s.schedule());  // a prefilled
  for (auto* q : {b.get(), c.get(), d.get()}) s.add(q);
  auto out = s.schedule();
  // a's decode first, then b (30), then c gets the remaining 19 tokens; d
  // waits (budget exhausted) even though it is short: no overtaking.
  ASSERT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(out.scheduled[0].seq, a.get());
  EXPECT_EQ(out.scheduled[0].n_tokens, 1);
  EXPECT_EQ(out.scheduled[1].seq, b.get());
  EXPECT_EQ(out.scheduled[1].n_tokens, 30);
  EXPECT_EQ(out.scheduled[2].seq, c.get());
  EXPECT_EQ(out.scheduled[2].n_tokens, 19);
  EXPECT_EQ(out.n_tokens(), 50);
  complete_step(s, out);
  out = s.schedule();
  // max_num_seqs = 3: d still waits.
  EXPECT_EQ(s.running().size(), 3u);
  EXPECT_EQ(s.waiting().front(), d.get());
}

TEST(Scheduler, PreemptsMostRecentlyAdmittedAndRequeuesAtFront) {
  KvCacheManager kv(4, 16, false);  // 64 tokens
  Scheduler s({.max_num_seqs = 8, .max_batched_tokens = 256}, kv);
  auto a = make_seq(1, 16), b = make_seq(2, 16), c = make_seq(3, 16);
  for (auto* q : {a.get(), b.get(), c.get()}) s.add(q);
  auto out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 3u);
  complete_step(s, out);  // each has 17 tokens now: needs a 2nd block -> 6 > 4
  out = s.schedule();
  // a needs a block (1 free): ok. b needs one: none -> preempt c (latest).
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], c.get());
  EXPECT_EQ(c->n_computed, 0);
  EXPECT_EQ(c->status, SeqStatus::kWaiting);
  EXPECT_EQ(s.waiting().front(), c.get());
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(s.total_preemptions(), 1u);
  EXPECT_EQ(kv.allocator().num_free(), 0);
  complete_step(s, out);
  // Finishing a frees room; c is readmitted and recomputes its 17 tokens.
  s.finish(a.get());
  out = s.schedule();
  bool c_ran = false;
  for (const auto& sc : out.scheduled)
    if (sc.seq == c.get()) {
      c_ran = true;
      EXPECT_EQ(sc.n_tokens, 17);
    }
  EXPECT_TRUE(c_ran);
}

TEST(Scheduler, RejectsPromptLargerThanCache) {
  KvCacheManager kv(4, 16, false);
  Scheduler s({}, kv);
  auto big = make_seq(1, 64);
  try {
    s.add(big.get());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache of 64 tokens"), std::string::npos) << e.what();
  }
  auto ok = make_seq(2, 63, 1000);
  s.add(ok.get());
  EXPECT_EQ(ok->max_total, 64);  // generation capped at the cache size
}

TEST(Scheduler, SingleSequenceFillingTheCacheNeverDeadlocks) {
  KvCacheManager kv(3, 16, true);
  Scheduler s({.max_num_seqs = 4, .max_batched_tokens = 8}, kv);
  auto a = make_seq(1, 20, 1000), b = make_seq(2, 20, 1000, 100);
  s.add(a.get());
  s.add(b.get());
  for (int step = 0; step < 500 && a->tokens.size() < 48; ++step) {
    auto out = s.schedule();
    ASSERT_FALSE(out.empty()) << "stalled at step " << step;
    complete_step(s, out);
  }
  EXPECT_EQ(a->tokens.size(), 48u);
  EXPECT_GT(s.total_preemptions(), 0u);
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

TEST(Scheduler, PausedAdmissionKeepsRunningSequencesGoing) {
  KvCacheManager kv(16, 16, false);
  Scheduler s({.max_num_seqs = 4, .max_batched_tokens = 64}, kv);
  auto a = make_seq(1, 8), b = make_seq(2, 8);
  s.add(a.get());
  complete_step(s, s.schedule());
  s.add(b.get());
  s.set_admission_paused(true);
  auto out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);  // a decodes, b waits
  EXPECT_EQ(out.scheduled[0].seq, a.get());
  complete_step(s, out);
  s.set_admission_paused(false);
  out = s.schedule();
  EXPECT_EQ(out.scheduled.size(), 2u);
}

}  // namespace
}  // namespace pagellm
