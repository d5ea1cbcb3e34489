// The prefix cache's disk tier under the engine: a second engine on the same
// --cache-dir (a restart) serves a repeated prompt's full blocks from disk and
// gives the tokens of a cold run; damaged files or another KV type give the
// cold run's tokens with nothing served from disk; blocks an elastic pool
// drops when it shrinks are found on disk.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine_runner.h"

namespace pagellm::test {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir()
      : path(fs::temp_directory_path() / ("pagellm-disk-engine-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

std::vector<int32_t> long_prompt(const Tokenizer& tok) {
  return tok.encode(
      "Once upon a time, in a small town near the sea, there lived a little girl named Mia. Mia "
      "had a red kite that she loved more than anything. Every morning she ran to the beach with "
      "her dog Max, and they played in the sand until the sun was high. One day a big wind came "
      "and took the kite far away over the water.");
}

EngineConfig config(const fs::path& dir, DType kv = DType::F16) {
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.kv_type = kv;
  cfg.disk_tier.dir = dir.string();
  return cfg;
}

void flip_a_byte_in_every_block_file(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".kvb") continue;
    std::fstream io(e.path(), std::ios::binary | std::ios::in | std::ios::out);
    io.seekg(-5, std::ios::end);
    char c;
    io.read(&c, 1);
    c = static_cast<char>(c ^ 0x01);
    io.seekp(-5, std::ios::end);
    io.write(&c, 1);
  }
}

TEST(EngineDiskTier, RestartServesTheRepeatedPromptFromDisk) {
  Loaded m = load("stories260K.gguf");
  const auto p = long_prompt(*m.tok);
  ASSERT_GT(p.size(), 64u);
  const uint64_t full = (p.size() - 1) / 16 * 16;  // at least one token is computed
  TempDir dir;
  EngineConfig cold = config(dir.path);
  cold.disk_tier.dir.clear();
  const auto want = run_all(m, {p}, cold, 12);

  EngineStats first, second;
  EXPECT_EQ(run_all(m, {p}, config(dir.path), 12, &first), want);
  EXPECT_TRUE(first.disk_tier);
  EXPECT_EQ(first.cached_prompt_tokens, 0u);
  EXPECT_EQ(run_all(m, {p}, config(dir.path), 12, &second), want);  // a restart
  EXPECT_EQ(second.cached_prompt_tokens, full);
  EXPECT_EQ(second.disk.hits, full / 16);
  EXPECT_EQ(second.prompt_tokens_computed, p.size() - full);

  // Every file damaged: one warning, nothing from disk, the same tokens.
  flip_a_byte_in_every_block_file(dir.path);
  EngineStats damaged;
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_all(m, {p}, config(dir.path), 12, &damaged), want);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(damaged.cached_prompt_tokens, 0u);
  EXPECT_EQ(damaged.disk.skipped, 1u);  // the first block: the match ends there
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
}

// After a restart, the repeated prompt queues behind another request
// (one sequence at a time): its blocks are read ahead off the engine thread
// while it waits, and the tokens are the cold run's with or without that.
TEST(EngineDiskTier, QueuedPromptIsReadAheadAfterARestart) {
  Loaded m = load("stories260K.gguf");
  const auto p = long_prompt(*m.tok);
  const auto other = m.tok->encode("The little dog ran to the park and found a big red ball.");
  const uint64_t full = (p.size() - 1) / 16 * 16;
  TempDir dir;
  EngineConfig cold = config(dir.path);
  cold.disk_tier.dir.clear();
  cold.scheduler.max_num_seqs = 1;
  const auto want = run_all(m, {other, p}, cold, 24);
  run_all(m, {p}, config(dir.path), 4);  // writes p's blocks

  EngineConfig warm = config(dir.path);
  warm.scheduler.max_num_seqs = 1;
  EngineStats ahead, plain;
  // The reader reads p's files while p waits behind `other`. On a busy
  // machine that can take longer than `other`'s few steps (p then computes
  // what is not read yet, rightly): the reads are waited for here.
  const auto reads_done = [&](Engine& e) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (e.stats().disk.prefetch_reads < full / 16 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  EXPECT_EQ(run_all(m, {other, p}, warm, 24, &ahead, reads_done), want);
  EXPECT_GE(ahead.disk.prefetched, 1u);
  EXPECT_LE(ahead.disk.prefetched, ahead.disk.hits);
  EXPECT_GE(ahead.disk.prefetch_reads, ahead.disk.prefetched);
  EXPECT_EQ(ahead.cached_prompt_tokens, ahead.disk.hits * 16);
  EXPECT_LE(ahead.cached_prompt_tokens, full);

  warm.disk_tier.prefetch_bytes = 0;  // no reading ahead: read when admitted
  EXPECT_EQ(run_all(m, {other, p}, warm, 24, &plain), want);
  EXPECT_EQ(plain.disk.prefetched, 0u);
  EXPECT_EQ(plain.disk.prefetch_reads, 0u);
  EXPECT_EQ(plain.cached_prompt_tokens, plain.disk.hits * 16);
}

// An elastic pool that gives chunks back under memory pressure hands their
// cached blocks to the disk tier (Engine::shrink_pool): once memory is back,
// the same engine finds the dropped part of a repeated prompt's prefix on
// disk (read, or recomputed where that is cheaper: both are lookups that
// found the file) and gives the cold run's tokens.
TEST(EngineDiskTier, BlocksOfAShrunkPoolAreFoundOnDisk) {
  Loaded m = load("stories260K.gguf");
  auto p = long_prompt(*m.tok);
  const auto story = long_prompt(*m.tok);
  p.insert(p.end(), story.begin() + 1, story.end());  // two stories: 9 full blocks
  const int64_t full = static_cast<int64_t>((p.size() - 1) / 16);
  TempDir dir;
  EngineConfig cold = config(dir.path);
  cold.disk_tier.dir.clear();
  const auto want = run_all(m, {p}, cold, 12)[0];

  EngineConfig cfg = config(dir.path);
  cfg.elastic_pool = true;
  cfg.pool_chunk_bytes = 40 << 10;  // a few blocks of this model per chunk
  cfg.memory_check_ms = 0;
  int64_t room = int64_t{1} << 40;
  cfg.memory_room = [&room] { return room; };
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  EXPECT_EQ(run_greedy(engine, p, 12), want);
  const EngineStats first = engine.stats();
  const int64_t chunk_blocks = first.pool.chunk_blocks;
  ASSERT_GT(full, chunk_blocks) << "the prefix must reach past chunk 0";
  ASSERT_EQ(first.cached_prompt_tokens, 0u);
  // The prompt's committed blocks (written first: the writer thread keeps
  // their order) are on disk before the pool shrinks; a block holding
  // generated tokens may follow.
  for (int i = 0; i < 500 && engine.stats().disk.files_written < static_cast<uint64_t>(full); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(engine.stats().disk.files_written, static_cast<uint64_t>(full));

  room = -(int64_t{1} << 40);  // memory is short: every chunk above chunk 0 goes
  engine.check_memory();
  const EngineStats low = engine.stats();
  EXPECT_GT(low.pool.shrinks, 0u);
  EXPECT_EQ(low.pool.populated_chunks, 1);
  room = int64_t{1} << 40;
  engine.check_memory();

  // The prefix's blocks in chunk 0 (ids from 0, lowest first) are still in
  // the pool; the rest were dropped with their chunks and are on disk.
  EXPECT_EQ(run_greedy(engine, p, 12), want);
  const EngineStats second = engine.stats();
  const uint64_t dropped = static_cast<uint64_t>(full - chunk_blocks);
  const uint64_t from_disk = second.disk.hits - first.disk.hits;
  const uint64_t recomputed = second.disk.recomputed - first.disk.recomputed;
  // Found on disk: read, or (a read not done yet on a busy machine, or
  // slower than computing) recomputed.
  EXPECT_GE(from_disk + recomputed, 1u);
  // A block computed rather than read ends the match: the rest is computed.
  EXPECT_LE(from_disk + recomputed, dropped);
  if (second.disk.recomputed == first.disk.recomputed) {
    EXPECT_EQ(from_disk, dropped);
  }
  EXPECT_EQ(second.cached_prompt_tokens,
            static_cast<uint64_t>(chunk_blocks + static_cast<int64_t>(from_disk)) * 16);
}

TEST(EngineDiskTier, AnotherKvTypeComputesEverything) {
  Loaded m = load("stories260K.gguf");
  const auto p = long_prompt(*m.tok);
  TempDir dir;
  run_all(m, {p}, config(dir.path), 4);
  EngineConfig cold = config(dir.path, DType::F32);
  cold.disk_tier.dir.clear();
  const auto want = run_all(m, {p}, cold, 12);
  EngineStats st;
  EXPECT_EQ(run_all(m, {p}, config(dir.path, DType::F32), 12, &st), want);
  EXPECT_EQ(st.cached_prompt_tokens, 0u);
  EXPECT_EQ(st.disk.hits, 0u);
  EXPECT_GE(st.disk.misses, 1u);
}

}  // namespace
}  // namespace pagellm::test
