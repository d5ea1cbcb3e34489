// Window KV groups: blocks leave a window group's table once no later query
// can see them, against a naive count of the positions a window needs.
#include "kvcache/kv_group.h"

#include <gtest/gtest.h>

#include <random>

#include "kvcache/kv_cache_manager.h"

namespace pagellm {
namespace {

TEST(KvGroups, FromLayerWindows) {
  const KvGroups g = KvGroups::from_layer_windows({32, 32, 0, 64, 32, 0});
  EXPECT_EQ(g.windows, (std::vector<int32_t>{0, 32, 64}));
  EXPECT_EQ(g.group_of_layer, (std::vector<int32_t>{1, 1, 0, 2, 1, 0}));
  EXPECT_EQ(g.layers_of(1), (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(g.n_layers_of(0), 2);
  EXPECT_EQ(KvGroups::from_layer_windows({0, 0}).n_groups(), 1);
}

// Blocks of the window table that a naive rule says must still be there:
// those holding any position in [next - W + 1, reserved end).
int32_t naive_live_blocks(int64_t next, int64_t end, int32_t W, int32_t bs) {
  const int64_t first = std::max<int64_t>(0, next - W + 1);
  if (end <= first) return 0;
  return static_cast<int32_t>((end - 1) / bs - first / bs + 1);
}

int32_t live(const std::vector<int32_t>& blocks) {
  int32_t n = 0;
  for (int32_t b : blocks) n += b != BlockTable::kNoBlock;
  return n;
}

TEST(KvGroups, WindowTablesDropBlocksThatLeftTheWindow) {
  const int32_t bs = 16, W = 40;
  KvCacheManager kv(64, bs, /*prefix_caching=*/true, {{W, 64}});
  EXPECT_FALSE(kv.prefix_caching());  // a window group cannot serve cached prefixes
  std::mt19937 rng(7);
  std::vector<int32_t> tokens;
  BlockTable t(bs);
  std::vector<BlockCopy> copies;
  int64_t computed = 0;
  while (computed < 900) {
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 70)(rng);
    ASSERT_TRUE(kv.reserve(t, computed, computed + n, copies));
    EXPECT_EQ(live(t.blocks(1)), naive_live_blocks(computed, computed + n, W, bs)) << computed;
    EXPECT_EQ(t.blocks(0).size(), static_cast<size_t>((computed + n + bs - 1) / bs));
    for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(rng() % 100));
    computed += n;
    kv.commit(tokens, t, computed);
    EXPECT_EQ(live(t.blocks(1)), naive_live_blocks(computed, computed, W, bs)) << computed;
    EXPECT_EQ(kv.allocator(1).num_used(), live(t.blocks(1)));
    if (computed > 64 * bs - 80) break;
  }
  EXPECT_TRUE(copies.empty());
  kv.free(t);
  EXPECT_EQ(kv.num_used_all(), 0);
}

TEST(KvGroups, ForkSharesAndCopiesOnWriteInEveryGroup) {
  const int32_t bs = 8;
  KvCacheManager kv(32, bs, false, {{12, 32}});
  BlockTable a(bs), b(bs);
  std::vector<BlockCopy> copies;
  std::vector<int32_t> tokens(30, 1);
  ASSERT_TRUE(kv.reserve(a, 0, 30, copies));
  kv.commit(tokens, a, 30);
  kv.fork(a, b);
  EXPECT_EQ(b.blocks(1), a.blocks(1));
  // Both write position 30 (in the shared last block): each group copies it.
  ASSERT_TRUE(kv.reserve(b, 30, 31, copies));
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].group, 0);
  EXPECT_EQ(copies[1].group, 1);
  EXPECT_NE(b.blocks(1).back(), a.blocks(1).back());
  kv.free(a);
  kv.free(b);
  EXPECT_EQ(kv.num_used_all(), 0);
}

TEST(KvGroups, ReservationIsAllOrNothingAcrossGroups) {
  const int32_t bs = 8;
  KvCacheManager kv(32, bs, false, {{16, 3}});  // room for 3 window blocks only
  BlockTable a(bs);
  std::vector<BlockCopy> copies;
  // 40 tokens in one step need 5 window blocks: refused, nothing taken.
  EXPECT_FALSE(kv.reserve(a, 0, 40, copies));
  EXPECT_EQ(kv.num_used_all(), 0);
  EXPECT_TRUE(a.blocks().empty());
  // Step by step the window never holds more than 3 blocks: it fits.
  std::vector<int32_t> tokens;
  for (int64_t pos = 0; pos < 200; ++pos) {
    ASSERT_TRUE(kv.reserve(a, pos, pos + 1, copies)) << pos;
    tokens.push_back(3);
    kv.commit(tokens, a, pos + 1);
    if (pos + 2 > 32 * bs) break;
  }
  EXPECT_LE(kv.allocator(1).num_used(), 3);
  kv.free(a);
  EXPECT_EQ(kv.num_used_all(), 0);
}

TEST(KvGroups, WindowGroupBlocksBoundTheNeedAndNeverExceedTheFullGroup) {
  // 4 sequences, window 32, block 16, steps of 64: 4 x (2 + 2) + 4.
  EXPECT_EQ(window_group_blocks(32, 16, 4, 64, 1000), 20);
  EXPECT_EQ(window_group_blocks(4096, 16, 64, 2048, 500), 500);
}

}  // namespace
}  // namespace pagellm
