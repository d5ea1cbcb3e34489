// The KV pool that follows the machine's memory (issue 54 item 4): group 0's
// host pools reserve their address range for the plan's blocks but hold
// memory only for chunks of blocks, ids [c * chunk_blocks, ...). Chunk 0 is
// populated at start, the next one when the allocator runs short and memory
// allows (BlockAllocator::set_chunks); under memory pressure the engine
// empties the top chunk (cached blocks dropped, the sequences holding blocks
// there preempted) and release_top() returns its pages to the OS. A chunk is
// sized to ~chunk_bytes over every elastic pool and its per-layer ranges are
// whole pages (4 KiB; a GPU's mapping granule) where the block size allows.
// A device's pools (a GPU, a staged device) are elastic the same way through
// the backend's elastic ranges (Backend::reserve_range: CUDA maps physical
// granules into one reserved range, so block ids and pointers never move).
// Block ids are shared by every device, so a chunk spans them all: memory
// short on one device gives the chunk back on each.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kvcache/block_allocator.h"
#include "kvcache/kv_cache_storage.h"

namespace pagellm {

struct ElasticPoolOptions {
  size_t chunk_bytes = size_t{32} << 20;  // a chunk's bytes over every elastic pool (about)
  // Whether `bytes` more may be populated now in `memory` ("host" for host
  // RAM, else a device with memory of its own: KvCacheStorage::memory_of),
  // i.e. it stays above that memory's headroom; asked once per memory the
  // chunk takes. Empty: always.
  std::function<bool(const std::string& memory, size_t bytes)> may_grow;
  // After a refusal, growth is not asked for again within this time (each
  // ask reads the memory probe).
  std::chrono::milliseconds retry_after{100};
};

struct ElasticPoolStats {
  int32_t chunk_blocks = 0;
  int32_t chunks = 0;            // of the plan's pool
  int32_t populated_chunks = 0;  // in memory now
  uint64_t grows = 0;            // chunks populated after the first
  uint64_t shrinks = 0;          // chunks given back to the OS
  uint64_t refusals = 0;         // growth refused for want of memory
};

class ElasticPool {
 public:
  // Sets `alloc`'s chunks (every block free) and populates chunk 0. Throws
  // SystemError when even that cannot be had.
  ElasticPool(KvCacheStorage& storage, BlockAllocator& alloc, ElasticPoolOptions options);
  ElasticPool(const ElasticPool&) = delete;
  ElasticPool& operator=(const ElasticPool&) = delete;

  // The blocks of chunk c: [begin, end).
  int32_t chunk_begin(int32_t c) const { return alloc_.chunk_begin(c); }
  int32_t chunk_end(int32_t c) const { return alloc_.chunk_end(c); }
  int32_t top_chunk() const { return alloc_.populated_chunks() - 1; }
  // Memory of chunk c over every elastic pool.
  size_t chunk_bytes(int32_t c) const;
  // Gives the top chunk's memory back to the OS. False, changing nothing,
  // while one of its blocks is in use or when only chunk 0 is left.
  // `dropped`: BlockAllocator::remove_top_chunk's (the chunk's cached blocks).
  bool release_top(const std::function<void(int32_t, std::span<const int32_t>)>& dropped = {});
  // Memory was seen back (a check found room): the next shortage of blocks
  // asks for growth at once instead of after retry_after.
  void memory_back() { refused_ = false; }
  ElasticPoolStats stats() const;

  // A chunk of about `target` bytes for pools whose blocks take
  // `block_bytes` over every layer, a multiple of `unit` blocks.
  static int32_t chunk_blocks_for(size_t target, size_t block_bytes, int32_t unit);

 private:
  bool grow(int32_t c);

  KvCacheStorage& storage_;
  BlockAllocator& alloc_;
  ElasticPoolOptions options_;
  size_t block_bytes_ = 0;  // one block over every elastic pool
  bool short_logged_ = false;
  bool probe_failed_ = false;  // may_grow threw: warned once
  std::chrono::steady_clock::time_point refused_at_{};
  bool refused_ = false;
  uint64_t grows_ = 0, shrinks_ = 0, refusals_ = 0;
};

}  // namespace pagellm
