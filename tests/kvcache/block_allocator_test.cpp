#include "kvcache/block_allocator.h"

#include <gtest/gtest.h>

#include <set>

#include "kvcache/block_table.h"
#include "util/error.h"

namespace pagellm {
namespace {

TEST(BlockAllocator, AllOrNothing) {
  BlockAllocator a(5);
  std::vector<int32_t> got;
  EXPECT_TRUE(a.allocate(3, got));
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_FALSE(a.allocate(3, got));  // only 2 left: takes none
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_TRUE(a.allocate(2, got));
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()).size(), 5u);  // distinct ids
  EXPECT_EQ(a.num_free(), 0);
  EXPECT_TRUE(a.allocate(0, got));
}

TEST(BlockAllocator, RefCounting) {
  BlockAllocator a(2);
  std::vector<int32_t> got;
  ASSERT_TRUE(a.allocate(1, got));
  const int32_t id = got[0];
  a.retain(id);
  EXPECT_EQ(a.block(id).ref_count, 2);
  a.release(id);
  EXPECT_EQ(a.num_free(), 1);  // still referenced once
  a.release(id);
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_THROW(a.release(id), Error);  // double free is caught
  EXPECT_THROW(a.retain(id), Error);
}

TEST(BlockTable, SlotsAndReserve) {
  BlockAllocator a(4);
  BlockTable t(16);
  EXPECT_EQ(t.blocks_needed(1), 1);
  ASSERT_TRUE(t.reserve(a, 17));
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(t.capacity_tokens(), 32);
  EXPECT_EQ(t.slot(0), t.blocks()[0] * 16);
  EXPECT_EQ(t.slot(17), t.blocks()[1] * 16 + 1);
  EXPECT_FALSE(t.reserve(a, 16 * 5));  // needs 3 more, only 2 free: nothing taken
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(a.num_free(), 2);
  ASSERT_TRUE(t.reserve(a, 64));
  EXPECT_EQ(a.num_free(), 0);
  t.release(a);
  EXPECT_EQ(a.num_free(), 4);  // no leaked blocks
  EXPECT_TRUE(t.blocks().empty());
}

}  // namespace
}  // namespace pagellm
