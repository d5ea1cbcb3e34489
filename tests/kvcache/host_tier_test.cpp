// The host tier under a KvCacheManager and a host KV storage (no model):
// blocks the pool evicts come back byte for byte on a prefix hit; the tier
// holds at most its size, least recently used out first, handing what it
// drops to the next tier (the disk tier: a restart restores them); every
// block the pool handed out comes back to it.
#include "kvcache/host_tier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "kvcache/block_copy.h"
#include "kvcache/disk_tier.h"
#include "kvcache/kv_cache_manager.h"
#include "util/fault_injector.h"

namespace pagellm {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kBlock = 16;
constexpr int32_t kPoolBlocks = 8;

KvPoolShape shape() {
  KvPoolShape s;
  s.layer_begin = 0;
  s.layer_end = 3;
  s.num_blocks = kPoolBlocks;
  s.block_size = kBlock;
  s.n_kv_heads = 2;
  s.head_dim = 32;
  s.dtype = DType::F16;
  return s;
}

BlockFileIdentity identity(const KvCacheStorage& s) {
  BlockFileIdentity id;
  id.model = {7, 9};
  id.block_size = kBlock;
  id.layout = storage_layout_digest(s);
  return id;
}

// A next tier that records what is handed down to it.
struct RecordingTier final : PrefixTier {
  void committed(int32_t, int32_t, std::span<const int32_t>) override {}
  bool fetch(int32_t, std::span<const int32_t>) override { return false; }
  RestoreCopy place(int32_t) override { return {}; }
  void demoted(const BlockFileHeader& h, std::span<const uint8_t> payload) override {
    headers.push_back(h);
    payloads.emplace_back(payload.begin(), payload.end());
  }
  std::vector<BlockFileHeader> headers;
  std::vector<std::vector<uint8_t>> payloads;
};

// A pool of kPoolBlocks blocks with a host tier of `tier_blocks` blocks in front of `next`.
struct Cache {
  explicit Cache(int32_t tier_blocks, PrefixTier* next = nullptr)
      : storage(shape(), {{"host", 0, 1}, {"host", 1, 3}}),
        manager(kPoolBlocks, kBlock, true),
        tier(HostTierOptions{static_cast<uint64_t>(tier_blocks) * storage_block_bytes(storage)},
             identity(storage), storage, kPoolBlocks, kBlock, next) {
    manager.set_prefix_tier(&tier);
  }
  std::vector<uint8_t> bytes_of(int32_t b) {
    std::vector<uint8_t> out(storage_block_bytes(storage));
    copy_block_out(storage, b, out.data());
    return out;
  }
  // Computes `tokens`: fills each new block with random bytes (seeded by its
  // position and first token), commits, frees. Returns every full block's bytes.
  std::vector<std::vector<uint8_t>> compute(const std::vector<int32_t>& tokens) {
    BlockTable t(kBlock);
    std::vector<BlockCopy> copies;
    const int64_t from = manager.match_prefix(tokens, t);
    EXPECT_TRUE(manager.reserve(t, from, static_cast<int64_t>(tokens.size()), copies));
    std::vector<uint8_t> buf(storage_block_bytes(storage));
    for (size_t i = static_cast<size_t>(from / kBlock); i < t.blocks().size(); ++i) {
      std::mt19937 rng(static_cast<uint32_t>(i * 1000 + static_cast<size_t>(tokens[i * kBlock])));
      for (auto& c : buf) c = static_cast<uint8_t>(rng());
      copy_block_in(storage, t.blocks()[i], buf.data());
    }
    manager.commit(tokens, t, static_cast<int64_t>(tokens.size()));
    std::vector<std::vector<uint8_t>> out;
    for (size_t i = 0; i < tokens.size() / kBlock; ++i) out.push_back(bytes_of(t.blocks()[i]));
    manager.free(t);
    return out;
  }
  // Matches `tokens` (with a table that keeps the blocks until freed).
  int64_t match(const std::vector<int32_t>& tokens, BlockTable& t) {
    return manager.match_prefix(tokens, t);
  }

  KvCacheStorage storage;
  KvCacheManager manager;
  HostTier tier;
};

std::vector<int32_t> prompt(int32_t first, int n_blocks) {
  std::vector<int32_t> p;
  for (int i = 0; i < n_blocks * kBlock + 1; ++i) p.push_back(first + i);
  return p;
}

// Another prompt of the whole pool: every cached block is evicted.
void flood(Cache& c, int32_t first) { c.compute(prompt(first, kPoolBlocks - 1)); }

TEST(HostTier, RestoreGivesTheEvictedBytes) {
  Cache c(16);
  const auto a = prompt(1000, 4);
  const auto want = c.compute(a);
  flood(c, 5000);
  EXPECT_EQ(c.tier.stats().stored, 4u);
  BlockTable t(kBlock);
  ASSERT_EQ(c.match(a, t), 4 * kBlock);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.bytes_of(t.blocks()[static_cast<size_t>(i)]), want[i]) << i;
  EXPECT_EQ(c.tier.stats().hits, 4u);
  EXPECT_EQ(c.tier.stats().bytes_out, 4 * storage_block_bytes(c.storage));
  c.manager.free(t);
  EXPECT_EQ(c.manager.allocator().num_used(), 0);
}

// Blocks copied ahead (by the worker, as during a forward pass) are the ones
// eviction then finds kept: nothing is copied at eviction, and a prefix hit
// restores the bytes they had.
TEST(HostTier, BlocksCopiedAheadAreKeptWhenEvicted) {
  Cache c(16);
  const auto a = prompt(1000, 4);
  const auto want = c.compute(a);
  // Nothing to copy while never-used blocks suffice (4 of 8 are cached).
  c.manager.copy_ahead(kPoolBlocks - 4);
  c.manager.copy_ahead_wait();
  EXPECT_EQ(c.tier.stats().stored_ahead, 0u);
  // The flood needs 7 blocks: it evicts 3 cached ones, the oldest first.
  c.manager.copy_ahead(kPoolBlocks - 1);
  c.manager.copy_ahead_wait();
  EXPECT_EQ(c.tier.stats().stored_ahead, 3u);
  EXPECT_EQ(c.tier.stats().stored, 3u);
  flood(c, 5000);
  EXPECT_EQ(c.tier.stats().stored, 4u);  // only the fourth copied at eviction
  EXPECT_EQ(c.tier.stats().stored_ahead, 3u);
  BlockTable t(kBlock);
  ASSERT_EQ(c.match(a, t), 4 * kBlock);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.bytes_of(t.blocks()[static_cast<size_t>(i)]), want[i]) << i;
  c.manager.free(t);
  EXPECT_EQ(c.manager.allocator().num_used(), 0);
}

// copy_ahead fills at most a quarter of the tier a step, and never hands an
// unfilled entry down to the next tier.
TEST(HostTier, CopyAheadTakesAQuarterOfTheSlotsAndHandsDownOnlyFilledBlocks) {
  RecordingTier next;
  Cache c(4, &next);
  std::vector<std::vector<uint8_t>> want;
  for (int32_t p = 0; p < 3; ++p) {
    const auto blocks = c.compute(prompt(1000 * (p + 1), 2));
    want.insert(want.end(), blocks.begin(), blocks.end());
  }
  c.manager.copy_ahead(kPoolBlocks);
  c.manager.copy_ahead_wait();
  EXPECT_EQ(c.tier.stats().stored_ahead, 1u);
  for (int step = 0; step < 6; ++step) {
    c.manager.copy_ahead(kPoolBlocks);
    c.manager.copy_ahead_wait();
  }
  // Every payload handed down is a block's bytes as computed.
  for (const auto& payload : next.payloads)
    EXPECT_NE(std::find(want.begin(), want.end(), payload), want.end());
  EXPECT_LE(c.tier.stats().held_blocks, 4);
}

TEST(HostTier, AnotherPrefixMisses) {
  Cache c(16);
  c.compute(prompt(1000, 4));
  flood(c, 5000);
  auto other = prompt(1000, 4);
  other[0] = 1;  // the first block differs: so does every key after it
  BlockTable t(kBlock);
  EXPECT_EQ(c.match(other, t), 0);
  EXPECT_EQ(c.tier.stats().hits, 0u);
  c.manager.free(t);
}

TEST(HostTier, HoldsAtMostItsSizeLeastRecentlyUsedOut) {
  RecordingTier next;
  Cache c(3, &next);
  const size_t bb = storage_block_bytes(c.storage);
  EXPECT_EQ(c.tier.stats().capacity_bytes, 3 * bb);
  const auto a = prompt(1000, 4);
  const auto want = c.compute(a);
  flood(c, 5000);  // a's 4 blocks out of the pool: the first is dropped from the tier
  HostTierStats s = c.tier.stats();
  EXPECT_EQ(s.stored, 4u);
  EXPECT_EQ(s.held_blocks, 3);
  EXPECT_LE(s.held_bytes, s.capacity_bytes);
  EXPECT_EQ(s.evicted, 1u);
  // What left went to the next tier, with its bytes and its place in the key chain.
  ASSERT_EQ(next.headers.size(), 1u);
  const Hash128 root = identity_key(identity(c.storage));
  const std::vector<int32_t> first(a.begin(), a.begin() + kBlock);
  EXPECT_EQ(next.headers[0].parent, root);
  EXPECT_EQ(next.headers[0].key, block_key(root, first));
  EXPECT_EQ(next.headers[0].tokens, first);
  EXPECT_EQ(next.payloads[0], want[0]);
  // The first block is gone: the match ends at once (the rest need it).
  BlockTable t(kBlock);
  EXPECT_EQ(c.match(a, t), 0);
  c.manager.free(t);
  // Many more prompts: never more than its size.
  for (int32_t k = 0; k < 6; ++k) {
    flood(c, 10000 + 1000 * k);
    EXPECT_LE(c.tier.stats().held_blocks, 3);
  }
  s = c.tier.stats();
  EXPECT_EQ(s.stored - s.evicted, static_cast<uint64_t>(s.held_blocks));
  EXPECT_EQ(next.headers.size(), s.evicted);
  EXPECT_EQ(c.manager.allocator().num_used(), 0);
}

TEST(HostTier, TheLastEvictedBlocksStay) {
  Cache c(4);
  const auto a = prompt(1000, 2), b = prompt(2000, 2);
  c.compute(b);
  const auto want_a = c.compute(a);
  flood(c, 5000);  // b then a into the tier (4 blocks: full)
  BlockTable t(kBlock);
  ASSERT_EQ(c.match(a, t), 2 * kBlock);
  c.manager.free(t);
  // The pool evicts the flood's blocks, then a's (used last): the tier
  // keeps the last four, a's among them; b went long ago.
  flood(c, 9000);
  BlockTable t2(kBlock);
  EXPECT_EQ(c.match(b, t2), 0);
  c.manager.free(t2);
  BlockTable t3(kBlock);
  ASSERT_EQ(c.match(a, t3), 2 * kBlock);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(c.bytes_of(t3.blocks()[static_cast<size_t>(i)]), want_a[static_cast<size_t>(i)]);
  c.manager.free(t3);
  EXPECT_LE(c.tier.stats().held_blocks, 4);
}

TEST(HostTier, BlocksDroppedToDiskComeBackAfterARestart) {
  struct TempDir {
    TempDir() : path(fs::temp_directory_path() / ("pagellm-host-tier-" + std::to_string(::getpid()))) {
      fs::remove_all(path);
    }
    ~TempDir() { fs::remove_all(path); }
    fs::path path;
  } dir;
  const auto a = prompt(1000, 3);
  std::vector<std::vector<uint8_t>> want;
  {
    KvCacheStorage st(shape(), {{"host", 0, 1}, {"host", 1, 3}});
    DiskTier disk(DiskTierOptions{dir.path.string(), 1 << 30}, identity(st), st, kPoolBlocks);
    Cache c(1, &disk);
    // Writes at commit fail (a full disk): only what the host tier drops reaches the disk.
    FaultInjector::arm("disk.write", {.times = -1});
    testing::internal::CaptureStderr();
    want = c.compute(a);
    disk.flush();
    testing::internal::GetCapturedStderr();
    FaultInjector::disarm("disk.write");
    ASSERT_EQ(disk.stats().files_written, 0u);
    flood(c, 5000);  // the tier (1 block) keeps a's last block, hands down the others
    disk.flush();
    EXPECT_GE(disk.stats().files_written, 2u);
    EXPECT_GE(c.tier.stats().evicted, 2u);
  }
  // Files for a's first two blocks (the third was still in memory: it is not on disk).
  KvCacheStorage st(shape(), {{"host", 0, 1}, {"host", 1, 3}});
  DiskTier disk(DiskTierOptions{dir.path.string(), 1 << 30}, identity(st), st, kPoolBlocks);
  KvCacheManager m(kPoolBlocks, kBlock, true);
  m.set_prefix_tier(&disk);
  BlockTable t(kBlock);
  ASSERT_EQ(m.match_prefix(a, t), 2 * kBlock);
  for (int i = 0; i < 2; ++i) {
    std::vector<uint8_t> got(storage_block_bytes(st));
    copy_block_out(st, t.blocks()[static_cast<size_t>(i)], got.data());
    EXPECT_EQ(got, want[static_cast<size_t>(i)]) << i;
  }
  m.free(t);
}

TEST(HostTier, RecomputesWhenComputingIsCheaper) {
  Cache c(16);
  const auto a = prompt(1000, 2);
  c.compute(a);
  flood(c, 5000);
  ASSERT_GT(c.tier.cost().copy_rate(), 0);  // measured on the copies in
  // A model that computes a block's tokens faster than its bytes copy.
  const double bb = static_cast<double>(storage_block_bytes(c.storage));
  c.tier.prefilled(kBlock * 1000, bb * 1000 / c.tier.cost().copy_rate() / 1000);
  BlockTable t(kBlock);
  EXPECT_EQ(c.match(a, t), 0);
  EXPECT_EQ(c.tier.stats().recomputed, 1u);
  c.manager.free(t);
  // And the usual case: prefill far slower than a copy.
  for (int i = 0; i < 100; ++i) c.tier.prefilled(1, 1.0);
  BlockTable t2(kBlock);
  EXPECT_EQ(c.match(a, t2), 2 * kBlock);
  c.manager.free(t2);
}

TEST(RestoreCost, RuleComparesCopyAndComputeTimes) {
  RestoreCost cost;
  EXPECT_TRUE(cost.restore_pays(1e6, 16, 0));  // nothing measured: restore
  cost.prefilled(1000, 1.0);                    // 1000 tokens/s: 16 tokens = 16 ms
  EXPECT_TRUE(cost.restore_pays(1e6, 16, 1e9));    // 1 ms
  EXPECT_FALSE(cost.restore_pays(1e6, 16, 1e7));   // 100 ms
}

}  // namespace
}  // namespace pagellm
