// StateCheckpoints (the hybrid prefix cache's recurrent-state checkpoints)
// and KvCacheManager::match_prefix with them: a match keeps the cached blocks
// only up to the last block that ends at a checkpoint, and counts only those
// as hits.
#include "kvcache/state_checkpoints.h"

#include <gtest/gtest.h>

#include <numeric>

#include "kvcache/kv_cache_manager.h"
#include "util/error.h"

namespace pagellm {
namespace {

std::vector<int32_t> iota_tokens(int n, int from = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

TEST(StateCheckpoints, FindsByHashAndPrefixAndEvictsSpeculativeOnesFirst) {
  StateCheckpoints c(/*first_slot=*/4, /*capacity=*/2, /*interval=*/64);
  const auto a = iota_tokens(64), b = iota_tokens(64, 100), d = iota_tokens(64, 200);
  const int32_t sa = c.store(1, a, /*shared=*/true);
  const int32_t sb = c.store(2, b);
  EXPECT_NE(sa, sb);
  EXPECT_GE(std::min(sa, sb), 4);
  EXPECT_LT(std::max(sa, sb), 6);
  EXPECT_EQ(c.find(1, a), sa);
  // The same hash with other tokens (a collision) is not a hit.
  EXPECT_FALSE(c.find(1, b));
  EXPECT_FALSE(c.contains(3, d));
  // Full: the speculative entry goes, although the shared one is older.
  const int32_t sd = c.store(3, d);
  EXPECT_EQ(sd, sb);
  EXPECT_TRUE(c.contains(1, a));
  EXPECT_FALSE(c.contains(2, b));
  // A restored entry becomes shared; with only shared ones, the least recently used goes.
  EXPECT_EQ(c.find(3, d), sd);
  EXPECT_EQ(c.store(4, b, true), sa);
  EXPECT_TRUE(c.contains(3, d));
  EXPECT_EQ(c.stats().evictions, 2u);
  c.drop(sd);
  EXPECT_FALSE(c.contains(3, d));
  EXPECT_EQ(c.stats().stored, 1);
  EXPECT_THROW(c.drop(3), Error);
  EXPECT_THROW(StateCheckpoints(0, 1, 0), ConfigError);
}

TEST(StateCheckpoints, MatchKeepsBlocksUpToTheLastCheckpoint) {
  constexpr int32_t kBs = 16;
  KvCacheManager kv(64, kBs, /*prefix_caching=*/true);
  StateCheckpoints c(1, 4, 64);
  kv.set_state_checkpoints(&c);
  // A first sequence computes 200 tokens: 12 full blocks hashed.
  const auto tokens = iota_tokens(200);
  BlockTable first(kBs);
  EXPECT_EQ(kv.match_prefix(tokens, first), 0);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.reserve(first, 0, 200, copies));
  kv.commit(tokens, first, 200);
  // Without a checkpoint nothing is reused, though 12 blocks are found.
  BlockTable t(kBs);
  PrefixLookups l;
  EXPECT_EQ(kv.match_prefix(tokens, t, &l), 0);
  EXPECT_EQ(l.found, 12u);
  EXPECT_EQ(l.hits, 0u);
  EXPECT_TRUE(t.blocks().empty());
  // Checkpoints after 64 and 128 tokens: the later one wins.
  for (int32_t end : {64, 128})
    c.store(first.hashes()[static_cast<size_t>(end / kBs - 1)],
            std::span(tokens).first(static_cast<size_t>(end)));
  EXPECT_EQ(kv.match_prefix(tokens, t, &l), 128);
  EXPECT_EQ(l.hits, 8u);
  EXPECT_EQ(l.queries, 12u);  // the 13th block would leave no token to compute
  EXPECT_EQ(t.blocks().size(), 8u);
  EXPECT_EQ(std::vector<int32_t>(first.blocks().begin(), first.blocks().begin() + 8), t.blocks());
  // Another prompt that diverges at token 100 reaches only the first checkpoint.
  auto other = tokens;
  other[100] = 9999;
  BlockTable u(kBs);
  EXPECT_EQ(kv.match_prefix(other, u), 64);
  const auto st = kv.allocator().stats();
  EXPECT_EQ(st.prefix_hits, 4u);  // counted in the allocator without `lookups`
  kv.free(t);
  kv.free(u);
  kv.free(first);
  EXPECT_EQ(kv.allocator().num_used(), 0);
}

}  // namespace
}  // namespace pagellm
