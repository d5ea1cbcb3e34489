// The disk tier under a KvCacheManager and a host KV storage (no model):
// committed blocks come back byte for byte in another manager on the same
// directory; damaged, short or foreign files are skipped (the match ends
// there, so the block is computed) with one warning per cause; the directory
// stays under its size; two tiers writing one directory leave only whole files.
#include "kvcache/disk_tier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "kvcache/kv_cache_manager.h"
#include "util/fault_injector.h"

namespace pagellm {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kBlock = 16;
constexpr int32_t kBlocks = 32;

struct TempDir {
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("pagellm-disk-tier-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

KvPoolShape shape(DType dtype = DType::F16) {
  KvPoolShape s;
  s.layer_begin = 0;
  s.layer_end = 3;
  s.num_blocks = kBlocks;
  s.block_size = kBlock;
  s.n_kv_heads = 2;
  s.head_dim = 32;
  s.dtype = dtype;
  return s;
}

// A storage, manager and tier over `dir`.
struct Cache {
  explicit Cache(const fs::path& dir, BlockFileIdentity id = identity(),
                 uint64_t max_bytes = 1 << 30, DType dtype = DType::F16)
      : Cache(DiskTierOptions{dir.string(), max_bytes}, id, dtype) {}
  Cache(DiskTierOptions options, BlockFileIdentity id = identity(), DType dtype = DType::F16)
      : storage(shape(dtype), {{"host", 0, 1}, {"host", 1, 3}}),
        manager(kBlocks, kBlock, true),
        tier(std::move(options), with_layout(id, storage), storage, kBlocks) {
    manager.set_prefix_tier(&tier);
  }
  static BlockFileIdentity identity() {
    BlockFileIdentity id;
    id.model = {1, 2};
    id.block_size = kBlock;
    return id;
  }
  static BlockFileIdentity with_layout(BlockFileIdentity id, const KvCacheStorage& s) {
    id.layout = storage_layout_digest(s);
    return id;
  }
  // Block b's bytes over every layer, K and V.
  std::vector<uint8_t> block_bytes(int32_t b) {
    std::vector<uint8_t> out;
    for (const auto& p : storage.pools())
      for (int32_t l = p->shape().layer_begin; l < p->shape().layer_end; ++l)
        for (void* base : {p->k(l), p->v(l)}) {
          const size_t n = static_cast<size_t>(kBlock) * p->shape().slot_bytes();
          auto* src = static_cast<uint8_t*>(base) + static_cast<size_t>(b) * n;
          out.insert(out.end(), src, src + n);
        }
    return out;
  }
  void randomize(int32_t b, uint32_t seed) {
    std::mt19937 rng(seed);
    for (const auto& p : storage.pools())
      for (int32_t l = p->shape().layer_begin; l < p->shape().layer_end; ++l)
        for (void* base : {p->k(l), p->v(l)}) {
          const size_t n = static_cast<size_t>(kBlock) * p->shape().slot_bytes();
          auto* dst = static_cast<uint8_t*>(base) + static_cast<size_t>(b) * n;
          for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(rng());
        }
  }
  // Computes `tokens` "for real": reserves, fills every block with random
  // bytes (seeded by the block's position and first token) and commits.
  // Returns the blocks' bytes in order.
  std::vector<std::vector<uint8_t>> compute(const std::vector<int32_t>& tokens, BlockTable& t) {
    std::vector<BlockCopy> copies;
    const int64_t from = manager.match_prefix(tokens, t);
    EXPECT_TRUE(manager.reserve(t, from, static_cast<int64_t>(tokens.size()), copies));
    for (size_t i = static_cast<size_t>(from / kBlock); i < t.blocks().size(); ++i)
      randomize(t.blocks()[i],
                static_cast<uint32_t>(i * 1000 + static_cast<size_t>(tokens[i * kBlock])));
    manager.commit(tokens, t, static_cast<int64_t>(tokens.size()));
    std::vector<std::vector<uint8_t>> out;
    for (int32_t b : t.blocks()) out.push_back(block_bytes(b));
    return out;
  }

  KvCacheStorage storage;
  KvCacheManager manager;
  DiskTier tier;
};

std::vector<int32_t> prompt(int32_t n, int32_t salt = 0) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back((i * 7 + salt * 131) % 500 + 1);
  return p;
}

std::vector<fs::path> block_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".kvb") out.push_back(e.path());
  return out;
}

TEST(DiskTier, BlocksComeBackInAnotherCacheByteForByte) {
  TempDir dir;
  const auto tokens = prompt(4 * kBlock + 1);  // 4 full blocks and one token to compute
  std::vector<std::vector<uint8_t>> written;
  {
    Cache a(dir.path);
    BlockTable t(kBlock);
    written = a.compute(tokens, t);
    a.tier.flush();
    EXPECT_EQ(a.tier.stats().files_written, 4u);
    a.manager.free(t);
  }
  EXPECT_EQ(block_files(dir.path).size(), 4u);
  Cache b(dir.path);
  BlockTable t(kBlock);
  EXPECT_EQ(b.manager.match_prefix(tokens, t), 4 * kBlock);
  ASSERT_EQ(t.blocks().size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(b.block_bytes(t.blocks()[i]), written[i]) << i;
  const DiskTierStats s = b.tier.stats();
  EXPECT_EQ(s.hits, 4u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_GT(s.bytes_read, 0u);
  // The blocks are now in the pool's prefix cache: a second match needs no disk.
  b.manager.free(t);
  BlockTable t2(kBlock);
  EXPECT_EQ(b.manager.match_prefix(tokens, t2), 4 * kBlock);
  EXPECT_EQ(b.tier.stats().hits, 4u);
  b.manager.free(t2);
  // A prompt that goes on past the cached blocks: a miss where they end.
  auto longer = prompt(6 * kBlock + 1);
  BlockTable t3(kBlock);
  EXPECT_EQ(b.manager.match_prefix(longer, t3), 4 * kBlock);
  EXPECT_EQ(b.tier.stats().misses, 1u);
  b.manager.free(t3);
}

// The second block's file damaged in each way: the match keeps the first
// block only (the rest is computed), one warning per cause, the file removed.
TEST(DiskTier, DamagedOrForeignFilesAreSkipped) {
  struct Case {
    const char* name;
    std::function<void(const fs::path&, Cache&)> damage;
  };
  const auto tokens = prompt(3 * kBlock + 1);
  auto rewrite_with = [&tokens](const fs::path& file,
                                const std::function<void(BlockFileHeader&)>& change) {
    // A well-formed file with another header under this block's name.
    std::ifstream in(file, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    BlockFileHeader h;
    std::span<const uint8_t> payload;
    ASSERT_EQ(parse_block_file(bytes, h, payload), BlockFileStatus::kOk);
    const std::vector<uint8_t> body(payload.begin(), payload.end());
    change(h);
    const auto out = encode_block_file(h, body);
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  };
  const std::vector<Case> cases = {
      {"truncated", [](const fs::path& f, Cache&) { fs::resize_file(f, fs::file_size(f) / 2); }},
      {"flipped byte",
       [](const fs::path& f, Cache&) {
         std::fstream io(f, std::ios::binary | std::ios::in | std::ios::out);
         io.seekg(static_cast<std::streamoff>(fs::file_size(f) - 10));
         char c;
         io.read(&c, 1);
         c ^= 0x10;
         io.seekp(static_cast<std::streamoff>(fs::file_size(f) - 10));
         io.write(&c, 1);
       }},
      {"another model",
       [&](const fs::path& f, Cache&) {
         rewrite_with(f, [](BlockFileHeader& h) { h.identity.model.lo ^= 5; });
       }},
      {"another kv type",
       [&](const fs::path& f, Cache&) {
         rewrite_with(f, [](BlockFileHeader& h) { h.identity.kv_type = DType::Q8_0; });
       }},
      {"another block size",
       [&](const fs::path& f, Cache&) {
         rewrite_with(f, [](BlockFileHeader& h) { h.identity.block_size = 8; });
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    Hash128 second_key;
    {
      Cache a(dir.path);
      BlockTable t(kBlock);
      a.compute(tokens, t);
      a.tier.flush();
      // The second block's key, as the tier names it.
      second_key =
          block_key(block_key(identity_key(Cache::with_layout(Cache::identity(), a.storage)),
                              std::span(tokens).first(kBlock)),
                    std::span(tokens).subspan(kBlock, kBlock));
      a.manager.free(t);
    }
    Cache b(dir.path);
    const fs::path file = b.tier.file_for(second_key);
    ASSERT_TRUE(fs::exists(file));
    c.damage(file, b);
    testing::internal::CaptureStderr();
    BlockTable t(kBlock);
    EXPECT_EQ(b.manager.match_prefix(tokens, t), kBlock);
    b.manager.free(t);
    // Damaged again (the first try removed it): the same cause warns no more.
    {
      Cache a(dir.path);
      BlockTable ta(kBlock);
      a.compute(tokens, ta);
      a.tier.flush();
      a.manager.free(ta);
    }
    c.damage(file, b);
    BlockTable t2(kBlock);
    // The first block is in b's pool now, the second is skipped again.
    EXPECT_EQ(b.manager.match_prefix(tokens, t2), kBlock);
    b.manager.free(t2);
    const std::string err = testing::internal::GetCapturedStderr();
    // Counted by the tier's own words: under qemu-user the emulator writes
    // warnings of its own to stderr whenever the CPU features are read.
    size_t warnings = 0;
    const std::string skipped = "KV disk tier: skipped";
    for (size_t at = 0; (at = err.find(skipped, at)) != std::string::npos; ++at) ++warnings;
    EXPECT_EQ(warnings, 1u) << err;
    EXPECT_EQ(b.tier.stats().skipped, 2u);
    EXPECT_FALSE(fs::exists(file));
  }
}

TEST(DiskTier, AnotherIdentityFindsNothing) {
  TempDir dir;
  const auto tokens = prompt(2 * kBlock + 1);
  {
    Cache a(dir.path);
    BlockTable t(kBlock);
    a.compute(tokens, t);
    a.tier.flush();
    a.manager.free(t);
  }
  BlockFileIdentity other = Cache::identity();
  other.model.hi ^= 1;
  Cache b(dir.path, other);
  BlockTable t(kBlock);
  EXPECT_EQ(b.manager.match_prefix(tokens, t), 0);
  b.manager.free(t);
  Cache q8(dir.path, Cache::identity(), 1 << 30, DType::Q8_0);  // another layout too
  BlockTable t2(kBlock);
  EXPECT_EQ(q8.manager.match_prefix(tokens, t2), 0);
  q8.manager.free(t2);
  EXPECT_EQ(b.tier.stats().skipped + q8.tier.stats().skipped, 0u);
}

TEST(DiskTier, ShortReadAndFullDiskAreSurvived) {
  TempDir dir;
  const auto tokens = prompt(2 * kBlock + 1);
  FaultScope faults;
  {
    Cache a(dir.path);
    FaultInjector::arm("disk.write", {.times = -1});
    testing::internal::CaptureStderr();
    BlockTable t(kBlock);
    a.compute(tokens, t);
    a.tier.flush();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("cannot write"), std::string::npos);
    EXPECT_EQ(a.tier.stats().writes_dropped, 2u);
    EXPECT_TRUE(block_files(dir.path).empty());
    FaultInjector::disarm("disk.write");
    a.manager.free(t);
  }
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_EQ(e.path().extension(), ".digest") << e.path();  // no temporary left behind
  {
    Cache a(dir.path);
    BlockTable t(kBlock);
    a.compute(tokens, t);
    a.tier.flush();
    a.manager.free(t);
  }
  Cache b(dir.path);
  FaultInjector::arm("disk.read");
  testing::internal::CaptureStderr();
  BlockTable t(kBlock);
  EXPECT_EQ(b.manager.match_prefix(tokens, t), 0);  // the first block read short
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(b.tier.stats().skipped, 1u);
  b.manager.free(t);
}

TEST(DiskTier, StaysUnderItsSizeEvictingTheOldest) {
  TempDir dir;
  uint64_t file_bytes = 0;
  {
    Cache probe(dir.path);
    file_bytes = kBlockFileFixedHeader + kBlock * 4 + storage_block_bytes(probe.storage);
  }
  const uint64_t cap = 10 * file_bytes;
  Cache a(dir.path, Cache::identity(), cap);
  for (int32_t i = 0; i < 30; ++i) {
    BlockTable t(kBlock);
    a.compute(prompt(kBlock + 1, i + 1), t);  // one new block each
    a.manager.free(t);
    a.tier.flush();
    uint64_t total = 0;
    for (const auto& f : block_files(dir.path)) total += fs::file_size(f);
    EXPECT_LE(total, cap) << "after " << i + 1 << " blocks";
  }
  EXPECT_GE(a.tier.stats().files_evicted, 20u);
  // The newest block is still there, the oldest is not.
  Cache b(dir.path, Cache::identity(), cap);
  BlockTable t_new(kBlock), t_old(kBlock);
  EXPECT_EQ(b.manager.match_prefix(prompt(kBlock + 1, 30), t_new), kBlock);
  EXPECT_EQ(b.manager.match_prefix(prompt(kBlock + 1, 1), t_old), 0);
  b.manager.free(t_new);
  b.manager.free(t_old);
}

// Two tiers (as two servers would) writing the same and different blocks into
// one directory at once: every file there reads back whole.
TEST(DiskTier, TwoWritersShareADirectory) {
  TempDir dir;
  auto work = [&dir](int32_t salt0) {
    Cache c(dir.path);
    for (int32_t i = 0; i < 12; ++i) {
      BlockTable t(kBlock);
      c.compute(prompt(3 * kBlock + 1, i % 2 ? salt0 + i : i), t);  // even i: shared prompts
      c.manager.free(t);
    }
    c.tier.flush();
  };
  std::thread x(work, 100), y(work, 200);
  x.join();
  y.join();
  const auto files = block_files(dir.path);
  EXPECT_GE(files.size(), 3u * 6 + 2 * 3u * 6);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    BlockFileHeader h;
    std::span<const uint8_t> payload;
    EXPECT_EQ(parse_block_file(bytes, h, payload), BlockFileStatus::kOk) << f;
    EXPECT_EQ(f.stem().string(), h.key.hex());
  }
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp-")) << e.path();
}

TEST(DiskTier, ModelDigestIsCachedAndFollowsTheContent) {
  TempDir dir;
  fs::create_directories(dir.path);
  const fs::path model = dir.path / "m.gguf";
  std::ofstream(model) << "weights one";
  const Hash128 d1 = model_file_digest(model.string(), dir.path.string());
  const std::string text = "weights one";
  EXPECT_EQ(model_file_digest(model.string(), dir.path.string()), d1);
  // A copy elsewhere has the same digest: the content names the model, not the path.
  const fs::path copy = dir.path / "copy.gguf";
  fs::copy_file(model, copy);
  EXPECT_EQ(model_file_digest(copy.string(), dir.path.string()), d1);
  std::ofstream(copy, std::ios::trunc) << "weights two";
  fs::last_write_time(copy, fs::last_write_time(copy) + std::chrono::seconds(2));
  EXPECT_NE(model_file_digest(copy.string(), dir.path.string()), d1);
  EXPECT_THROW(model_file_digest((dir.path / "absent").string(), dir.path.string()), Error);
  (void)text;
}


// Read ahead (kvcache/block_prefetch.h): a queued request's blocks are read
// on the reader thread; the lookup takes them, waits for a pending one only
// while that beats computing it, and forgets an aborted request's reads.

// Blocks of `tokens` written by one cache and gone from memory (a restart).
std::vector<std::vector<uint8_t>> written_blocks(const fs::path& dir,
                                                 const std::vector<int32_t>& tokens) {
  Cache a(dir);
  BlockTable t(kBlock);
  auto out = a.compute(tokens, t);
  a.tier.flush();
  return out;
}

// A reader that blocks on each read until opened (a slow disk).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int entered = 0;
  void pass() {
    std::unique_lock lk(mu);
    ++entered;
    cv.notify_all();
    cv.wait_for(lk, std::chrono::seconds(10), [this] { return open; });
  }
  void wait_entered() {
    std::unique_lock lk(mu);
    cv.wait_for(lk, std::chrono::seconds(10), [this] { return entered > 0; });
  }
  void release() {
    std::lock_guard lk(mu);
    open = true;
    cv.notify_all();
  }
};

bool wait_for_reads(const DiskTier& tier, uint64_t n) {
  for (int i = 0; i < 1000 && tier.stats().prefetch_reads < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return tier.stats().prefetch_reads >= n;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(DiskTierPrefetch, ReadAheadBlocksRestoreByteForByte) {
  TempDir dir;
  const auto tokens = prompt(6 * kBlock + 3);
  const auto written = written_blocks(dir.path, tokens);
  Cache b(dir.path);
  b.manager.prefetch(7, tokens);
  ASSERT_TRUE(wait_for_reads(b.tier, 6));
  BlockTable t(kBlock);
  ASSERT_EQ(b.manager.match_prefix(tokens, t), 6 * kBlock);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(b.block_bytes(t.blocks()[i]), written[i]) << i;
  const DiskTierStats s = b.tier.stats();
  EXPECT_EQ(s.hits, 6u);
  EXPECT_EQ(s.prefetched, 6u);
  EXPECT_EQ(s.prefetch_reads, 6u);
}

TEST(DiskTierPrefetch, LookupDoesNotWaitForASlowReadWhenComputingIsCheaper) {
  TempDir dir;
  const auto tokens = prompt(4 * kBlock + 1);
  written_blocks(dir.path, tokens);
  Gate gate;
  DiskTierOptions o{dir.path.string()};
  o.read_hook = [&gate](const fs::path&) { gate.pass(); };
  Cache b(std::move(o));
  b.tier.prefilled(1e6, 1.0);  // a block computes in 16 us
  b.manager.prefetch(1, tokens);
  gate.wait_entered();  // the first read is under way, and stays so
  BlockTable t(kBlock);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(b.manager.match_prefix(tokens, t), 0);  // computed, not waited for
  EXPECT_LT(seconds_since(t0), 0.5);
  EXPECT_EQ(b.tier.stats().hits, 0u);
  EXPECT_GE(b.tier.stats().recomputed, 1u);
  gate.release();
}

TEST(DiskTierPrefetch, LookupWaitsForAPendingReadCheaperThanComputing) {
  TempDir dir;
  const auto tokens = prompt(4 * kBlock + 1);
  const auto written = written_blocks(dir.path, tokens);
  std::atomic<int> reads{0};
  DiskTierOptions o{dir.path.string()};
  o.read_hook = [&reads](const fs::path&) {
    if (reads++ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };
  Cache b(std::move(o));
  b.tier.prefilled(1, 1.0);  // a block computes in 16 s: any read is cheaper
  b.manager.prefetch(1, tokens);
  BlockTable t(kBlock);
  ASSERT_EQ(b.manager.match_prefix(tokens, t), 4 * kBlock);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(b.block_bytes(t.blocks()[i]), written[i]) << i;
  EXPECT_EQ(b.tier.stats().hits, 4u);
  EXPECT_GE(b.tier.stats().prefetch_waited, 1u);
  EXPECT_EQ(b.tier.stats().recomputed, 0u);
}

TEST(DiskTierPrefetch, ForgottenReadsAreDroppedAndTheLookupReadsItself) {
  TempDir dir;
  const auto tokens = prompt(3 * kBlock + 1);
  const auto written = written_blocks(dir.path, tokens);
  Gate gate;
  DiskTierOptions o{dir.path.string()};
  o.read_hook = [&gate](const fs::path&) { gate.pass(); };
  Cache b(std::move(o));
  b.manager.prefetch(5, tokens);
  gate.wait_entered();
  b.manager.forget_prefetch(5);  // aborted while its first block is being read
  gate.release();
  BlockTable t(kBlock);
  ASSERT_EQ(b.manager.match_prefix(tokens, t), 3 * kBlock);  // read on this thread
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(b.block_bytes(t.blocks()[i]), written[i]) << i;
  EXPECT_EQ(b.tier.stats().prefetched, 0u);
  EXPECT_LE(b.tier.stats().prefetch_reads, 1u);  // the one under way; the rest never read
}

TEST(DiskTierPrefetch, ADamagedFileReadAheadIsSkippedAndComputed) {
  TempDir dir;
  const auto tokens = prompt(3 * kBlock + 1);
  written_blocks(dir.path, tokens);
  Cache probe(dir.path);
  // The second block's file, flipped in its payload.
  const Hash128 k0 = block_key(identity_key(probe.tier.identity()),
                               std::span(tokens).first(kBlock));
  const Hash128 k1 = block_key(k0, std::span(tokens).subspan(kBlock, kBlock));
  {
    std::fstream f(probe.tier.file_for(k1), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f);
    f.seekg(-5, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-5, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  Cache b(dir.path);
  b.manager.prefetch(1, tokens);
  ASSERT_TRUE(wait_for_reads(b.tier, 3));
  BlockTable t(kBlock);
  EXPECT_EQ(b.manager.match_prefix(tokens, t), kBlock);  // the first block only
  EXPECT_EQ(b.tier.stats().skipped, 1u);
  EXPECT_FALSE(fs::exists(b.tier.file_for(k1)));
}

// A cached block leaving the pool (an eviction, or the elastic pool giving
// its chunk back under memory pressure) is written if its file is missing
// (here the commit's write failed on a full disk), and comes back after a
// restart byte for byte.
TEST(DiskTier, EvictedBlocksAreWrittenIfMissing) {
  TempDir dir;
  const auto tokens = prompt(2 * kBlock + 1);
  std::vector<std::vector<uint8_t>> want;
  {
    Cache a(dir.path);
    BlockTable t(kBlock);
    FaultInjector::arm("disk.write", {.times = -1});
    testing::internal::CaptureStderr();  // the write warning
    want = a.compute(tokens, t);
    a.tier.flush();
    testing::internal::GetCapturedStderr();
    FaultInjector::disarm("disk.write");
    EXPECT_EQ(block_files(dir.path).size(), 0u);
    for (size_t i = 0; i < 2; ++i)
      a.tier.evicted(t.blocks()[i], std::span(tokens).subspan(i * kBlock, kBlock));
    a.tier.flush();
    EXPECT_EQ(block_files(dir.path).size(), 2u);
    a.manager.free(t);
  }
  Cache b(dir.path);
  BlockTable t(kBlock);
  ASSERT_EQ(b.manager.match_prefix(tokens, t), 2 * kBlock);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(b.block_bytes(t.blocks()[i]), want[i]) << i;
}

}  // namespace
}  // namespace pagellm
