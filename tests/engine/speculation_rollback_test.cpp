// Rollback of drafted tokens, as a property test without a model: random
// sequences (sharing prefixes, forked, preempted, finished at random) carry
// random drafts through the scheduler; each step "writes" every scheduled
// token into a shadow of the KV slots (after the copy-on-write copies), and a
// random number of drafts is accepted. After every step:
//  - every block's reference count is the number of tables holding it, and
//    used + free is the whole cache (nothing leaked, nothing double-owned);
//  - no table holds blocks past its tokens (rejected drafts' blocks went back);
//  - every computed position of every running sequence reads its own token
//    from the shadow slots, so neither a rejected draft nor a block from the
//    prefix cache left the wrong K/V where it counts;
//  - each table's prefix hashes are the chained hashes of its tokens.
// At the end every sequence is finished and no block is in use.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

#include "engine/scheduler.h"

namespace pagellm {
namespace {

struct Sim {
  static constexpr int32_t kBlock = 8;
  static constexpr int32_t kBlocks = 20;

  explicit Sim(uint32_t seed, bool prefix_caching)
      : rng(seed),
        kv(kBlocks, kBlock, prefix_caching),
        sched(SchedulerConfig{.max_num_seqs = 6,
                              .max_batched_tokens = 8 + static_cast<int32_t>(seed % 24),
                              .max_prefill_tokens_while_decoding = 0,
                              .max_draft_rows = 12},
              kv),
        slots(static_cast<size_t>(kBlocks * kBlock), -1) {}

  int rand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

  void add_sequence() {
    // A small alphabet and shared openings: the prefix cache gets hits.
    std::vector<int32_t> prompt;
    const int shared = rand(0, 2) * kBlock;
    for (int i = 0; i < shared; ++i) prompt.push_back(i % 3);
    for (int i = rand(1, 14); i > 0; --i) prompt.push_back(rand(0, 3));
    auto s = std::make_unique<Sequence>(next_id++, prompt,
                                        static_cast<int64_t>(prompt.size()) + rand(1, 30), kBlock);
    sched.add(s.get());
    seqs[s->id] = std::move(s);
  }

  void fork_one() {
    for (Sequence* p : sched.running()) {
      if (p->n_pending() != 1 || p->n_computed < p->n_prompt) continue;
      auto c = std::make_unique<Sequence>(next_id++, p->tokens, p->max_total, kBlock);
      c->n_prompt = p->n_prompt;
      sched.add_fork(p, c.get());
      seqs[c->id] = std::move(c);
      return;
    }
  }

  void finish(Sequence* s) {
    sched.finish(s);
    seqs.erase(s->id);
  }

  void step() {
    for (auto& [id, s] : seqs) {
      s->draft.clear();
      if (s->status == SeqStatus::kRunning && rand(0, 3) > 0)
        for (int i = rand(0, 5); i > 0; --i) s->draft.push_back(rand(0, 3));
    }
    SchedulerOutput out = sched.schedule();
    ASSERT_TRUE(out.failed.empty());
    for (const BlockCopy& c : out.copies)
      for (int32_t i = 0; i < kBlock; ++i)
        slots[static_cast<size_t>(c.dst * kBlock + i)] = slots[static_cast<size_t>(c.src * kBlock + i)];
    for (const ScheduledSeq& sc : out.scheduled) {
      Sequence* s = sc.seq;
      const int64_t size = static_cast<int64_t>(s->tokens.size());
      ASSERT_LE(sc.n_draft, static_cast<int64_t>(s->draft.size()));
      for (int64_t p = s->n_computed; p < s->n_computed + sc.n_tokens; ++p)
        slots[static_cast<size_t>(s->blocks.slot(p))] =
            p < size ? s->tokens[static_cast<size_t>(p)] : s->draft[static_cast<size_t>(p - size)];
      drafted += sc.n_draft;
    }
    sched.update_after_step(out);
    for (const ScheduledSeq& sc : out.scheduled) {
      Sequence* s = sc.seq;
      if (s->n_computed != static_cast<int64_t>(s->tokens.size())) continue;  // mid-prefill
      // Accept a random number of drafts, then one token of "the model's".
      const int64_t a = rand(0, static_cast<int>(sc.n_draft));
      for (int64_t i = 0; i < a; ++i) s->tokens.push_back(s->draft[static_cast<size_t>(i)]);
      int32_t next = rand(0, 3);
      if (a < sc.n_draft && next == s->draft[static_cast<size_t>(a)]) next = (next + 1) % 4;
      s->tokens.push_back(next);
      accepted += a;
      if (static_cast<int64_t>(s->tokens.size()) >= s->max_total) {
        finish(s);
        continue;
      }
      sched.accept_draft(s, a);
    }
    // Abort one now and then, running or waiting.
    if (!seqs.empty() && rand(0, 9) == 0) {
      auto it = seqs.begin();
      std::advance(it, rand(0, static_cast<int>(seqs.size()) - 1));
      finish(it->second.get());
    }
  }

  void check_invariants() {
    const BlockAllocator& alloc = kv.allocator();
    std::vector<int32_t> holders(static_cast<size_t>(kBlocks), 0);
    for (auto& [id, s] : seqs) {
      const auto& blocks = s->blocks.blocks();
      const int64_t size = static_cast<int64_t>(s->tokens.size());
      ASSERT_LE(static_cast<int64_t>(blocks.size()), (size + kBlock - 1) / kBlock)
          << "sequence " << id << " holds blocks past its tokens";
      for (int32_t b : blocks) ++holders[static_cast<size_t>(b)];
      if (s->status != SeqStatus::kRunning) continue;
      for (int64_t p = 0; p < s->n_computed; ++p)
        ASSERT_EQ(slots[static_cast<size_t>(s->blocks.slot(p))], s->tokens[static_cast<size_t>(p)])
            << "sequence " << id << " position " << p;
      const auto& hashes = s->blocks.hashes();
      uint64_t parent = 0;
      for (size_t i = 0; i < hashes.size(); ++i) {
        parent = BlockAllocator::chain_hash(
            parent, std::span<const int32_t>(s->tokens).subspan(i * kBlock, kBlock));
        ASSERT_EQ(hashes[i], parent) << "sequence " << id << " block " << i;
      }
    }
    int32_t used = 0;
    for (int32_t b = 0; b < kBlocks; ++b) {
      ASSERT_EQ(alloc.block(b).ref_count, holders[static_cast<size_t>(b)]) << "block " << b;
      used += holders[static_cast<size_t>(b)] > 0;
    }
    ASSERT_EQ(alloc.num_used(), used);
  }

  std::mt19937 rng;
  KvCacheManager kv;
  Scheduler sched;
  std::vector<int32_t> slots;  // the token whose K/V each slot holds
  std::map<uint64_t, std::unique_ptr<Sequence>> seqs;
  uint64_t next_id = 1;
  int64_t drafted = 0, accepted = 0;
};

TEST(SpeculationRollback, RandomAcceptsKeepTheCacheConsistent) {
  int64_t drafted = 0, accepted = 0;
  uint64_t preemptions = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Sim sim(seed, /*prefix_caching=*/seed % 4 != 0);
    for (int iter = 0; iter < 400; ++iter) {
      if (sim.seqs.size() < 8 && sim.rand(0, 2) == 0) sim.add_sequence();
      if (sim.rand(0, 15) == 0) sim.fork_one();
      ASSERT_NO_FATAL_FAILURE(sim.step()) << "seed " << seed << " step " << iter;
      ASSERT_NO_FATAL_FAILURE(sim.check_invariants()) << "seed " << seed << " step " << iter;
    }
    while (!sim.seqs.empty()) sim.finish(sim.seqs.begin()->second.get());
    EXPECT_EQ(sim.kv.allocator().num_used(), 0) << "seed " << seed;
    drafted += sim.drafted;
    accepted += sim.accepted;
    preemptions += sim.sched.total_preemptions();
  }
  std::printf("drafted %lld, accepted %lld, preemptions %llu\n", static_cast<long long>(drafted),
              static_cast<long long>(accepted), static_cast<unsigned long long>(preemptions));
  EXPECT_GT(drafted, 1000);
  EXPECT_GT(accepted, 300);
  EXPECT_GT(preemptions, 10u);
}

}  // namespace
}  // namespace pagellm
