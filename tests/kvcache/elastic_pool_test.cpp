// The elastic KV pool: the allocator hands out blocks of populated chunks
// only, lowest id first (checked against a naive set), grows when short and
// evicts cached blocks only when growth is refused, and gives the top chunk
// back only when nothing holds it; the pool's pages are resident exactly for
// populated chunks (mincore, the kernel's view) and giving a chunk back
// never touches the bytes of the chunks below it.
#include "kvcache/elastic_pool.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kvcache/block_allocator.h"
#include "kvcache/kv_cache_storage.h"

namespace pagellm {
namespace {

TEST(BlockAllocatorChunks, LowestPopulatedBlockFirstAgainstASet) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    const int32_t n = 5 + static_cast<int32_t>(rng() % 60),
                  chunk = 1 + static_cast<int32_t>(rng() % 9);
    BlockAllocator a(n);
    bool allow = true;
    int32_t grown = 0;
    a.set_chunks(chunk, 1, [&](int32_t c) {
      EXPECT_EQ(c, a.populated_chunks());  // always the next chunk
      if (allow) ++grown;
      return allow;
    });
    std::set<int32_t> free_ids;  // the reference: free blocks of populated chunks
    for (int32_t i = 0; i < std::min(chunk, n); ++i) free_ids.insert(i);
    std::vector<int32_t> held;
    for (int op = 0; op < 300; ++op) {
      allow = rng() % 4 != 0;
      if (rng() % 2 == 0 || held.empty()) {
        const int32_t want = 1 + static_cast<int32_t>(rng() % 4);
        // Growth adds the next chunks while allowed and short.
        std::set<int32_t> expect_free = free_ids;
        int32_t populated = a.populated_chunks();
        if (allow)
          while (static_cast<int32_t>(expect_free.size()) < want && populated < a.num_chunks()) {
            for (int32_t i = populated * chunk; i < std::min(n, (populated + 1) * chunk); ++i)
              expect_free.insert(i);
            ++populated;
          }
        std::vector<int32_t> got;
        const bool ok = a.allocate(want, got);
        ASSERT_EQ(ok, static_cast<int32_t>(expect_free.size()) >= want);
        free_ids = expect_free;
        ASSERT_EQ(a.populated_chunks(), populated);
        if (ok)
          for (int32_t id : got) {
            ASSERT_EQ(id, *free_ids.begin());
            free_ids.erase(free_ids.begin());
            held.push_back(id);
          }
      } else {
        const size_t i = rng() % held.size();
        a.release(held[i]);
        free_ids.insert(held[i]);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      }
      ASSERT_EQ(a.num_free(), static_cast<int32_t>(free_ids.size()));
      ASSERT_EQ(a.num_used(), static_cast<int32_t>(held.size()));
      ASSERT_EQ(a.available_blocks(), std::min(n, a.populated_chunks() * chunk));
    }
  }
}

TEST(BlockAllocatorChunks, GrowsBeforeEvictingAndEvictsWhenRefused) {
  BlockAllocator a(8);
  bool allow = true;
  a.set_chunks(4, 1, [&](int32_t) { return allow; });
  std::vector<int32_t> got;
  ASSERT_TRUE(a.allocate(4, got));
  const int32_t toks[4] = {1, 2, 3, 4};
  a.set_hash(got[0], 11, toks);
  a.release(got[0]);  // cached
  EXPECT_EQ(a.num_cached(), 1);
  std::vector<int32_t> more;
  ASSERT_TRUE(a.allocate(1, more));  // a new chunk rather than the cached block
  EXPECT_EQ(more[0], 4);
  EXPECT_EQ(a.populated_chunks(), 2);
  EXPECT_TRUE(a.find(11, toks).has_value());
  // Refused growth: the cached block is evicted only when nothing else is free.
  allow = false;
  ASSERT_TRUE(a.allocate(3, more));
  EXPECT_TRUE(a.find(11, toks).has_value());
  ASSERT_TRUE(a.allocate(1, more));
  EXPECT_FALSE(a.find(11, toks).has_value());
  EXPECT_FALSE(a.allocate(1, more));  // nothing left, no growth: none taken
  EXPECT_EQ(a.stats().populated, 8);
  EXPECT_EQ(a.stats().total, 8);
}

TEST(BlockAllocatorChunks, TopChunkLeavesOnlyWhenNothingHoldsIt) {
  BlockAllocator a(10);
  a.set_chunks(4, 3, {});
  EXPECT_EQ(a.available_blocks(), 10);
  std::vector<int32_t> got;
  ASSERT_TRUE(a.allocate(10, got));
  const int32_t toks[2] = {5, 6};
  a.set_hash(9, 99, toks);
  for (int32_t id = 0; id < 8; ++id) a.release(id);
  EXPECT_FALSE(a.remove_top_chunk());  // blocks 8 and 9 are held
  EXPECT_EQ(a.populated_chunks(), 3);
  a.release(8);
  a.release(9);  // cached
  EXPECT_TRUE(a.remove_top_chunk());
  EXPECT_FALSE(a.find(99, toks).has_value());  // its cached block went with it
  EXPECT_EQ(a.available_blocks(), 8);
  EXPECT_EQ(a.num_free(), 8);
  EXPECT_EQ(a.num_used(), 0);
  EXPECT_TRUE(a.remove_top_chunk());
  EXPECT_FALSE(a.remove_top_chunk());  // chunk 0 stays
  got.clear();
  EXPECT_FALSE(a.allocate(5, got));  // no grow function: 4 blocks is all
  ASSERT_TRUE(a.allocate(4, got));
  for (int32_t id : got) EXPECT_LT(id, 4);
}

// Resident pages of [p, p + bytes) by mincore (whole pages inside the range).
size_t resident_pages(const void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end <= begin) return 0;
  std::vector<unsigned char> vec((end - begin) / page);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(begin), end - begin, vec.data()), 0);
  size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

size_t inner_pages(const void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  return end > begin ? (end - begin) / page : 0;
}

// `device`: the pool in a staged device's memory (its backend's elastic
// ranges, as a GPU's), else in host RAM.
void check_pool(int32_t num_blocks, int32_t head_dim, size_t chunk_target,
                cpu::CpuBackend* device = nullptr) {
  SCOPED_TRACE(testing::Message() << num_blocks << " blocks, head_dim " << head_dim
                                  << (device ? ", staged device" : ""));
  KvPoolShape s{.layer_begin = 0,
                .layer_end = 3,
                .num_blocks = num_blocks,
                .block_size = 16,
                .n_kv_heads = 2,
                .head_dim = head_dim,
                .dtype = DType::F16};
  const size_t held_at_start = device ? device->held_bytes() : 0;
  KvCacheStorage storage(s, {{device ? "cpu:1" : "host", 0, 3}},
                         [device](const std::string&) -> Backend* { return device; }, nullptr,
                         {}, {}, /*elastic=*/true);
  KvPool& pool = *storage.pools()[0];
  ASSERT_TRUE(pool.elastic());
  EXPECT_EQ(storage.pool_bytes_by_device()[0].own_memory, device != nullptr);
  EXPECT_EQ(storage.memory_of(pool), device ? "cpu:1" : "host");
  // What the device's backend holds follows the pool's populated blocks.
  auto check_held = [&] {
    if (device) {
      EXPECT_EQ(device->held_bytes() - held_at_start, pool.resident_bytes());
    }
  };
  BlockAllocator alloc(num_blocks);
  ElasticPool ep(storage, alloc, {.chunk_bytes = chunk_target});
  const int32_t cb = alloc.chunk_blocks();
  const size_t block_bytes = 16 * s.slot_bytes();
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  ASSERT_EQ(cb * block_bytes % page, 0u) << "chunk ranges are whole pages";
  auto range = [&](int32_t l, int part, int32_t first, int32_t count) {
    auto* base = static_cast<uint8_t*>(part == 0 ? pool.k(l) : pool.v(l));
    return std::pair<uint8_t*, size_t>{base + first * block_bytes, count * block_bytes};
  };
  // The populated chunks' pages are resident, the others' not: where a
  // layer's range does not start on a page, a page straddling two chunks
  // stays with the lower one (at most one per chunk boundary).
  auto check_resident = [&](int32_t populated) {
    const int32_t end = alloc.chunk_end(populated - 1);
    for (int32_t l = 0; l < 3; ++l)
      for (int part = 0; part < 2; ++part) {
        auto [p, n] = range(l, part, 0, end);
        EXPECT_EQ(resident_pages(p, n), inner_pages(p, n)) << "layer " << l;
        if (end < num_blocks) {
          auto [q, m] = range(l, part, end, num_blocks - end);
          const size_t slack =
              reinterpret_cast<uintptr_t>(p) % page == 0 ? 0 : alloc.num_chunks() + 1;
          EXPECT_LE(resident_pages(q, m), slack) << "layer " << l << " part " << part;
        }
      }
  };
  check_resident(1);
  EXPECT_EQ(pool.resident_bytes(), static_cast<size_t>(cb) * pool.block_bytes_all_layers());
  check_held();
  // Grow through the allocator; write every block of every layer.
  std::vector<int32_t> got;
  ASSERT_TRUE(alloc.allocate(std::min(num_blocks, 2 * cb + 1), got));
  const int32_t populated = alloc.populated_chunks();
  ASSERT_EQ(populated, std::min(alloc.num_chunks(), 3));
  check_resident(populated);
  check_held();
  const size_t held_grown = device ? device->held_bytes() : 0;
  auto fill = [&](int32_t b) { return static_cast<uint8_t>(b * 7 + 1); };
  for (int32_t l = 0; l < 3; ++l)
    for (int part = 0; part < 2; ++part)
      for (int32_t b : got) {
        auto [p, n] = range(l, part, b, 1);
        std::memset(p, fill(b), n);
      }
  // The top chunk goes back only once free; the blocks below keep their bytes.
  EXPECT_FALSE(ep.release_top());
  for (int32_t b : got)
    if (b >= alloc.chunk_begin(populated - 1)) alloc.release(b);
  ASSERT_TRUE(ep.release_top());
  EXPECT_EQ(alloc.populated_chunks(), populated - 1);
  check_resident(populated - 1);
  check_held();
  if (device) {
    EXPECT_LT(device->held_bytes(), held_grown);
  }
  for (int32_t l = 0; l < 3; ++l)
    for (int part = 0; part < 2; ++part)
      for (int32_t b : got) {
        if (b >= alloc.chunk_begin(populated - 1)) continue;
        auto [p, n] = range(l, part, b, 1);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], fill(b)) << "block " << b << " layer " << l;
      }
  EXPECT_EQ(ep.stats().shrinks, 1u);
  EXPECT_EQ(ep.stats().grows, static_cast<uint64_t>(populated - 1));
}

TEST(ElasticPool, PopulatedChunksAreResidentAndReleasesKeepTheRest) {
  check_pool(64, 64, 64 << 10);  // 4 KiB per layer range and block
  check_pool(63, 32, 40 << 10);  // 2 KiB: chunks of even blocks; V starts mid-page
  check_pool(37, 16, 20 << 10);  // 1 KiB: multiples of 4 blocks
}

TEST(ElasticPool, AStagedDevicesPoolGivesItsOwnMemoryBack) {
  cpu::CpuBackend device(nullptr, /*staged=*/true);  // keeps its own memory, as a GPU
  ASSERT_FALSE(device.uses_host_memory());
  check_pool(64, 64, 64 << 10, &device);
  check_pool(63, 32, 40 << 10, &device);
  EXPECT_EQ(device.held_bytes(), 0u);  // every pool gone: nothing held
}

TEST(ElasticPool, GrowthAsksForTheChunksBytesAndStopsWhenRefused) {
  KvPoolShape s{.layer_begin = 0,
                .layer_end = 2,
                .num_blocks = 32,
                .block_size = 16,
                .n_kv_heads = 2,
                .head_dim = 64,
                .dtype = DType::F16};
  KvCacheStorage storage(s, {{"host", 0, 2}}, {}, nullptr, {}, {}, true);
  BlockAllocator alloc(32);
  std::vector<size_t> asked;
  bool allow = true;
  ElasticPool ep(storage, alloc,
                 {.chunk_bytes = 128 << 10,
                  .may_grow =
                      [&](const std::string& memory, size_t b) {
                        EXPECT_EQ(memory, "host");
                        asked.push_back(b);
                        return allow;
                      },
                  .retry_after = std::chrono::milliseconds(0)});
  EXPECT_TRUE(asked.empty());  // chunk 0 is the floor: populated unasked
  const size_t per_block = storage.pools()[0]->block_bytes_all_layers();
  std::vector<int32_t> got;
  ASSERT_TRUE(alloc.allocate(alloc.chunk_blocks() + 1, got));
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], static_cast<size_t>(alloc.chunk_blocks()) * per_block);
  allow = false;
  std::vector<int32_t> more;
  EXPECT_FALSE(alloc.allocate(alloc.chunk_blocks(), more));
  EXPECT_EQ(ep.stats().refusals, 1u);
  EXPECT_EQ(storage.pool_bytes_by_device()[0].resident,
            2 * static_cast<size_t>(alloc.chunk_blocks()) * per_block);
  EXPECT_EQ(storage.pool_bytes_by_device()[0].planned, s.total_bytes());
  allow = true;
  EXPECT_TRUE(alloc.allocate(alloc.chunk_blocks(), more));
}

}  // namespace
}  // namespace pagellm
