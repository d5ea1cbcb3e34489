// Elastic device memory on a GPU (backend/cuda/vmm_ranges.h through the
// CUDA backend's reserve/commit/decommit_range): committed granules read as
// zeros and take the GPU's memory (cudaMemGetInfo, the memory watcher's
// probe, sees it go and come back), a decommit keeps the bytes of granules
// another commit still holds, and an elastic KV pool on the GPU gives its
// top chunk back. Skipped without a GPU (or without VMM support).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "device/memory_probe.h"
#include "kvcache/elastic_pool.h"
#include "kvcache/kv_cache_storage.h"

namespace pagellm::cuda {
namespace {

uint64_t gpu_free() {
  SystemProbe probe;
  return probe.cuda(0).free_bytes;
}

TEST(CudaVmmRanges, CommitTakesMemoryAndDecommitGivesItBack) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaBackend b(0);
  const size_t g = b.elastic_granularity();
  void* base = g ? b.reserve_range(8 * g) : nullptr;
  if (!base) GTEST_SKIP() << "no VMM on this GPU or driver";
  auto* p = static_cast<uint8_t*>(base);
  const uint64_t free0 = gpu_free();
  ASSERT_TRUE(b.commit_range(p, 4 * g));
  EXPECT_EQ(b.elastic_mapped_bytes(), 4 * g);
  EXPECT_GE(free0 - gpu_free(), 4 * g);
  std::vector<uint8_t> host(4 * g, 0xff);
  b.download(host.data(), p, 4 * g);
  for (size_t i = 0; i < host.size(); i += 4093) ASSERT_EQ(host[i], 0) << "byte " << i;
  std::vector<uint8_t> pattern(2 * g);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 31 + 7);
  b.upload(p, pattern.data(), pattern.size());
  // A range inside granule 1 (held by the first commit too): taking it back
  // unmaps nothing.
  ASSERT_TRUE(b.commit_range(p + g + 100, 1000));
  EXPECT_EQ(b.elastic_mapped_bytes(), 4 * g);
  b.decommit_range(p + g + 100, 1000);
  EXPECT_EQ(b.elastic_mapped_bytes(), 4 * g);
  const uint64_t before = gpu_free();
  b.decommit_range(p + 2 * g, 2 * g);
  EXPECT_EQ(b.elastic_mapped_bytes(), 2 * g);
  EXPECT_GE(gpu_free() - before, 2 * g);
  std::vector<uint8_t> back(2 * g);
  b.download(back.data(), p, 2 * g);
  EXPECT_EQ(back, pattern);
  b.release_range(base, 8 * g);
  EXPECT_EQ(b.elastic_mapped_bytes(), 0u);
}

TEST(CudaVmmRanges, AnElasticKvPoolOnTheGpuGivesItsTopChunkBack) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaBackend b(0);
  void* probe = b.reserve_range(1);
  if (!probe) GTEST_SKIP() << "no VMM on this GPU or driver";
  b.release_range(probe, 1);
  KvPoolShape s{.layer_begin = 0,
                .layer_end = 2,
                .num_blocks = 4096,
                .block_size = 16,
                .n_kv_heads = 8,
                .head_dim = 128,
                .dtype = DType::F16};
  KvCacheStorage storage(s, {{"cuda:0", 0, 2}}, [&b](const std::string&) -> Backend* { return &b; },
                         nullptr, {}, {}, /*elastic=*/true);
  KvPool& pool = *storage.pools()[0];
  ASSERT_TRUE(pool.elastic());
  EXPECT_EQ(storage.memory_of(pool), "cuda:0");
  EXPECT_TRUE(storage.pool_bytes_by_device()[0].own_memory);
  BlockAllocator alloc(s.num_blocks);
  std::vector<std::string> asked;
  ElasticPool ep(storage, alloc,
                 {.chunk_bytes = size_t{16} << 20,
                  .may_grow = [&](const std::string& memory, size_t) {
                    asked.push_back(memory);
                    return true;
                  }});
  const size_t one = b.elastic_mapped_bytes();
  EXPECT_GE(one, pool.resident_bytes());
  std::vector<int32_t> got;
  ASSERT_TRUE(alloc.allocate(alloc.chunk_blocks() + 1, got));
  ASSERT_EQ(alloc.populated_chunks(), 2);
  ASSERT_FALSE(asked.empty());
  EXPECT_EQ(asked[0], "cuda:0");
  const size_t two = b.elastic_mapped_bytes();
  EXPECT_GT(two, one);
  for (int32_t id : got) alloc.release(id);
  ASSERT_TRUE(ep.release_top());
  EXPECT_EQ(b.elastic_mapped_bytes(), one);
}

}  // namespace
}  // namespace pagellm::cuda
