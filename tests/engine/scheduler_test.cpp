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

TEST(Scheduler, RunningPromptsHoldSeatsForTheirForks) {
  // A prompt with n = 3 samples takes three seats from admission on, while it
  // still runs alone: each sample will need its own recurrent-state slot.
  KvCacheManager kv(64, 16, false);
  Scheduler s({.max_num_seqs = 4, .max_batched_tokens = 200, .reserve_forks = true}, kv);
  auto a = make_seq(1, 40), b = make_seq(2, 10), c = make_seq(3, 10);
  a->forks = 2;
  s.add(a.get());
  s.add(b.get());
  s.add(c.get());
  auto out = s.schedule();
  // a (3 seats) and b (1): c waits although only two sequences run.
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(s.running().size(), 2u);
  EXPECT_EQ(s.waiting().front(), c.get());
  complete_step(s, out);
  s.schedule();
  EXPECT_EQ(s.waiting().front(), c.get());
  // Without the reservation the same queue admits c at once.
  KvCacheManager kv2(64, 16, false);
  Scheduler plain({.max_num_seqs = 4, .max_batched_tokens = 200}, kv2);
  auto a2 = make_seq(1, 40), b2 = make_seq(2, 10), c2 = make_seq(3, 10);
  a2->forks = 2;
  for (auto* q : {a2.get(), b2.get(), c2.get()}) plain.add(q);
  EXPECT_EQ(plain.schedule().scheduled.size(), 3u);
}

TEST(Scheduler, CapsPrefillTokensWhileSequencesDecode) {
  KvCacheManager kv(64, 16, false);
  Scheduler s(
      {.max_num_seqs = 8, .max_batched_tokens = 200, .max_prefill_tokens_while_decoding = 24}, kv);
  auto a = make_seq(1, 10), b = make_seq(2, 100), c = make_seq(3, 40);
  s.add(a.get());
  auto out = s.schedule();  // nothing decodes yet: the whole budget is open
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].n_tokens, 10);
  complete_step(s, out);
  s.add(b.get());
  s.add(c.get());
  // a decodes: prompt tokens are capped at 24 per step, across b and c, FCFS.
  std::vector<int64_t> b_chunks;
  while (b->n_computed < b->n_prompt) {
    out = s.schedule();
    int64_t prompt_tokens = 0;
    bool a_ran = false;
    int64_t b_after = b->n_computed;
    for (const auto& sc : out.scheduled) {
      if (sc.seq == a.get()) {
        a_ran = true;
        EXPECT_EQ(sc.n_tokens, 1);
      } else {
        prompt_tokens += sc.n_tokens;
      }
      if (sc.seq == b.get()) {
        b_chunks.push_back(sc.n_tokens);
        b_after += sc.n_tokens;
      }
      if (sc.seq == c.get()) {
        EXPECT_EQ(b_after, 100) << "c overtook b";
      }
    }
    EXPECT_TRUE(a_ran) << "a decode was left out";
    EXPECT_LE(prompt_tokens, 24);
    complete_step(s, out);
  }
  EXPECT_EQ(b_chunks, (std::vector<int64_t>{24, 24, 24, 24, 4}));
  // With the cap off, the same state schedules a whole prompt in one step.
  KvCacheManager kv2(64, 16, false);
  Scheduler s2(
      {.max_num_seqs = 8, .max_batched_tokens = 200, .max_prefill_tokens_while_decoding = 0}, kv2);
  auto x = make_seq(4, 10), y = make_seq(5, 100);
  s2.add(x.get());
  complete_step(s2, s2.schedule());
  s2.add(y.get());
  out = s2.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[1].n_tokens, 100);
}

// A burst of prompts with one 48-token prefix: the first computes it, the
// others wait for its blocks and take them from the prefix cache.
TEST(Scheduler, BurstWithSharedPrefixComputesThePrefixOnce) {
  for (const bool caching : {true, false}) {
    KvCacheManager kv(64, 16, caching);
    Scheduler s({.max_num_seqs = 8, .max_batched_tokens = 512}, kv);
    std::vector<std::unique_ptr<Sequence>> seqs;
    for (int i = 0; i < 4; ++i) {
      seqs.push_back(make_seq(static_cast<uint64_t>(i + 1), 56));
      for (int j = 48; j < 56; ++j)
        seqs.back()->tokens[static_cast<size_t>(j)] = 1000 * (i + 1) + j;
    }
    auto unrelated = make_seq(9, 40, 100, 500);
    for (auto& q : seqs) s.add(q.get());
    int64_t prompt_tokens_run = 0;
    auto out = s.schedule();
    for (const auto& sc : out.scheduled) prompt_tokens_run += sc.n_tokens;
    if (caching) {
      ASSERT_EQ(out.scheduled.size(), 1u);  // the others wait for its blocks
    } else {
      ASSERT_EQ(out.scheduled.size(), 4u);  // nothing to wait for
    }
    complete_step(s, out);
    s.add(unrelated.get());
    out = s.schedule();
    for (const auto& sc : out.scheduled)
      if (sc.seq->n_computed < sc.seq->n_prompt) prompt_tokens_run += sc.n_tokens;
    complete_step(s, out);
    for (auto& q : seqs) EXPECT_GE(q->n_generated(), 1) << "seq " << q->id;  // all prefilled
    EXPECT_EQ(unrelated->n_generated(), 1);
    if (caching) {
      for (size_t i = 1; i < seqs.size(); ++i) EXPECT_EQ(seqs[i]->n_cached_prompt, 48);
      EXPECT_EQ(prompt_tokens_run, 56 + 3 * 8 + 40);
    } else {
      EXPECT_EQ(prompt_tokens_run, 4 * 56 + 40);
    }
  }
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
