// Property test of the KV block bookkeeping: thousands of random admit /
// grow / fork / free / abort / preempt operations, checking after each that
// every block is accounted for exactly once.
#include "kvcache/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace pagellm {
namespace {

struct Seq {
  std::vector<int32_t> tokens;
  int64_t computed = 0;
  BlockTable table{16};
};

void check_invariants(const KvCacheManager& kv, const std::vector<std::unique_ptr<Seq>>& seqs) {
  const BlockAllocator& a = kv.allocator();
  std::map<int32_t, int32_t> refs;
  for (const auto& s : seqs) {
    for (int32_t id : s->table.blocks()) ++refs[id];
    // Waste: at most one partial block beyond what the sequence holds.
    EXPECT_LT(s->table.capacity_tokens() - static_cast<int64_t>(s->tokens.size()), 16);
  }
  int32_t used = 0;
  for (int32_t id = 0; id < a.num_blocks(); ++id) {
    const int32_t expect = refs.count(id) ? refs[id] : 0;
    ASSERT_EQ(a.block(id).ref_count, expect) << "block " << id;
    if (expect > 0) ++used;
  }
  EXPECT_EQ(a.num_used(), used);
  EXPECT_EQ(a.num_free() + a.num_used(), a.num_blocks());
  EXPECT_LE(a.num_cached(), a.num_free());
}

TEST(KvCacheManagerProperty, RandomOperationsKeepEveryBlockAccountedFor) {
  for (bool prefix : {true, false}) {
    std::mt19937 rng(prefix ? 11 : 12);
    KvCacheManager kv(48, 16, prefix);
    std::vector<std::unique_ptr<Seq>> seqs;
    std::vector<std::vector<int32_t>> prefixes = {{}, {}, {}};
    for (auto& p : prefixes)
      for (int i = 0; i < 40; ++i) p.push_back(static_cast<int32_t>(rng() % 50));
    uint64_t copies_seen = 0;
    for (int step = 0; step < 5000; ++step) {
      const int op = static_cast<int>(rng() % 6);
      if (op == 0 || seqs.empty()) {  // admit a new sequence with some shared prefix
        auto s = std::make_unique<Seq>();
        const auto& p = prefixes[rng() % 3];
        s->tokens.assign(p.begin(), p.begin() + static_cast<long>(rng() % p.size()));
        for (int i = static_cast<int>(rng() % 20) + 1; i > 0; --i)
          s->tokens.push_back(static_cast<int32_t>(rng() % 50));
        s->computed = kv.match_prefix(s->tokens, s->table);
        ASSERT_LT(s->computed, static_cast<int64_t>(s->tokens.size()));
        std::vector<BlockCopy> copies;
        if (kv.reserve(s->table, s->computed, static_cast<int64_t>(s->tokens.size()), copies)) {
          s->computed = static_cast<int64_t>(s->tokens.size());
          kv.commit(s->tokens, s->table, s->computed);
          seqs.push_back(std::move(s));
        } else {
          kv.free(s->table);  // all-or-nothing: give the prefix back
        }
      } else {
        const size_t i = rng() % seqs.size();
        Seq& s = *seqs[i];
        if (op == 1 || op == 2) {  // grow by a decode token
          s.tokens.push_back(static_cast<int32_t>(rng() % 50));
          std::vector<BlockCopy> copies;
          const size_t before = s.table.blocks().size();
          if (kv.reserve(s.table, s.computed, static_cast<int64_t>(s.tokens.size()), copies)) {
            s.computed = static_cast<int64_t>(s.tokens.size());
            kv.commit(s.tokens, s.table, s.computed);
            copies_seen += copies.size();
            for (const auto& c : copies) EXPECT_NE(c.src, c.dst);
          } else {
            s.tokens.pop_back();
            EXPECT_EQ(s.table.blocks().size(), before);  // nothing taken
          }
        } else if (op == 3) {  // fork (n > 1 samples)
          auto child = std::make_unique<Seq>();
          child->tokens = s.tokens;
          child->computed = s.computed;
          kv.fork(s.table, child->table);
          seqs.push_back(std::move(child));
        } else {  // finish, abort or preempt: all free the blocks
          kv.free(s.table);
          seqs.erase(seqs.begin() + static_cast<long>(i));
        }
      }
      check_invariants(kv, seqs);
      if (HasFatalFailure()) return;
    }
    for (auto& s : seqs) kv.free(s->table);
    seqs.clear();
    check_invariants(kv, seqs);
    const auto st = kv.allocator().stats();
    EXPECT_EQ(st.used, 0);
    for (int32_t id = 0; id < kv.allocator().num_blocks(); ++id)
      EXPECT_EQ(kv.allocator().block(id).ref_count, 0);
    if (prefix) {
      EXPECT_GT(st.prefix_hits, 0u);
      EXPECT_GT(st.cached, 0);
    }
    EXPECT_GT(copies_seen, 0u);
  }
}

TEST(KvCacheManager, PrefixMatchLeavesOneTokenAndEvictsLru) {
  KvCacheManager kv(4, 16, true);
  std::vector<int32_t> a(32), b(32);
  for (int i = 0; i < 32; ++i) a[i] = i, b[i] = 100 + i;
  BlockTable ta(16), tb(16), tc(16);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.reserve(ta, 0, 32, copies));
  kv.commit(a, ta, 32);
  kv.free(ta);
  EXPECT_EQ(kv.allocator().num_cached(), 2);
  // Same 32 tokens again: only the first block is reused (one token must be computed).
  EXPECT_EQ(kv.match_prefix(a, tc), 16);
  kv.free(tc);
  // Fill the cache with other content: a's blocks are evicted, oldest first.
  ASSERT_TRUE(kv.reserve(tb, 0, 32, copies));
  kv.commit(b, tb, 32);
  BlockTable td(16);
  ASSERT_TRUE(kv.reserve(td, 0, 32, copies));  // needs both cached blocks of a
  EXPECT_EQ(kv.allocator().stats().evictions, 2u);
  BlockTable te(16);
  EXPECT_EQ(kv.match_prefix(a, te), 0);
}

}  // namespace
}  // namespace pagellm
