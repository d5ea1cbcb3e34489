// The prefix cache's disk tier (issue 54): full blocks that commit() hashes
// are written to a directory, one file per block named by its chained key
// (kvcache/block_file.h), so that prefixes survive a restart. The engine
// thread copies a block's bytes (every layer's K and V) into a bounded queue
// and a writer thread writes them (a full queue drops the write rather than
// stall a step); each file goes to a unique temporary name, then rename(), so
// servers sharing a directory never see half a file. The directory is kept
// under a size by deleting the files least recently used (by mtime; a hit
// touches its file). Reads run ahead on a reader thread
// (kvcache/block_prefetch.h): when a request is queued, the files of its
// prompt's blocks that the pool and the host tier lack are read and checked
// there, and when it is admitted a lookup takes the checked bytes (a memcpy
// into the pool). A block still being read is waited for only while the read
// left is cheaper than computing it (kvcache/restore_cost.h, with the
// reader's measured rate), and never longer than computing it would take;
// a block nobody read ahead is read on the engine thread under the same
// rule. A file that fails a check is skipped (and removed) with one warning
// per cause, and the block is computed instead.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "kvcache/block_copy.h"
#include "kvcache/block_file.h"
#include "kvcache/block_prefetch.h"
#include "kvcache/kv_cache_storage.h"
#include "kvcache/prefix_tier.h"
#include "kvcache/restore_cost.h"

namespace pagellm {

struct DiskTierStats {
  uint64_t hits = 0;            // blocks read back
  uint64_t misses = 0;          // lookups with no usable file
  uint64_t skipped = 0;         // of those, files refused by a check
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
  uint64_t files_written = 0;
  uint64_t files_evicted = 0;
  uint64_t writes_dropped = 0;  // the queue was full
  uint64_t prefetched = 0;      // of the hits, blocks read ahead by the reader thread
  uint64_t prefetch_waited = 0; // of those, blocks the lookup waited for (cheaper than computing)
  uint64_t recomputed = 0;      // on disk (or being read), but computing was cheaper
  uint64_t prefetch_reads = 0;  // files the reader thread read
};

struct DiskTierOptions {
  std::string dir;
  uint64_t max_bytes = uint64_t{4} << 30;
  // Queued writes at most (bytes); a block that does not fit is not written.
  uint64_t queue_bytes = uint64_t{64} << 20;
  // Blocks read ahead and not yet taken, at most (bytes); 0: no reading ahead.
  uint64_t prefetch_bytes = uint64_t{64} << 20;
  // Runs on the reader thread before each read ahead (tests: a slow disk).
  BlockPrefetcher::ReadHook read_hook;
};

// The model file's content digest, cached in `dir` under a name from the
// file's path, size and modification time (hashing a large file takes
// seconds; later starts read the cached digest). Throws SystemError when the
// file cannot be read.
Hash128 model_file_digest(const std::string& model_path, const std::string& dir);

// The digest of the storage's layout (group 0's pools: layers, heads, head
// size, type, device). (The bytes of one block: kvcache/block_copy.h.)
Hash128 storage_layout_digest(const KvCacheStorage& storage);

class DiskTier final : public PrefixTier {
 public:
  // `storage`'s group 0 pools (num_blocks of them) are read and written.
  // Creates the directory; throws ConfigError when it cannot.
  DiskTier(DiskTierOptions options, BlockFileIdentity identity, KvCacheStorage& storage,
           int32_t num_blocks);
  // Finishes the queued writes.
  ~DiskTier() override;

  void committed(int32_t block, int32_t parent, std::span<const int32_t> tokens) override;
  bool fetch(int32_t parent, std::span<const int32_t> tokens) override;
  // The bytes read, copied in by the returned copy (a host pool) or now.
  RestoreCopy place(int32_t block) override;
  // Its key learned; its file written unless there or queued already.
  void restored(int32_t block, int32_t parent, std::span<const int32_t> tokens,
                std::span<const uint8_t> payload) override;
  // A block the host tier drops (kvcache/host_tier.h): written unless its
  // file is there (or queued) already, or the queue is full.
  void demoted(const BlockFileHeader& header, std::span<const uint8_t> payload) override;
  // A cached block leaves the pool (an eviction, or the elastic pool giving
  // its chunk back): written unless its file is there or queued already.
  void evicted(int32_t block, std::span<const int32_t> tokens) override;
  // Reads ahead the files of `tokens`' blocks past the first `held`, in
  // order, up to the first block not on disk or the staging bytes.
  void prefetch(uint64_t owner, int32_t parent, std::span<const int32_t> tokens,
                size_t held) override;
  void forget_prefetch(uint64_t owner) override;
  void prefilled(double tokens, double seconds) override { cost_.prefilled(tokens, seconds); }
  const RestoreCost& cost() const { return cost_; }

  const BlockFileIdentity& identity() const { return identity_; }
  // Waits until every queued write is done (tests, shutdown).
  void flush();
  DiskTierStats stats() const;
  const DiskTierOptions& options() const { return options_; }
  std::filesystem::path file_for(const Hash128& key) const;

 private:
  struct Job {
    BlockFileHeader header;
    std::vector<uint8_t> payload;
  };
  Hash128 parent_key(int32_t parent) const;
  // Block `block`'s key after `parent`'s (false: the parent's is unknown).
  bool learn_key(int32_t block, int32_t parent, std::span<const int32_t> tokens);
  // Queues block `block`'s bytes under `header` (the engine thread's copy).
  void queue_block(int32_t block, BlockFileHeader header);
  // The file's bytes read (here or ahead) for `want`: checked into
  // staged_payload_, or refused (a warning, the file removed), or missing.
  bool fetch_read(const BlockFileHeader& want);
  void writer_loop();
  void write_file(const Job& job);
  // Deletes the least recently used files until the directory is under
  // 90% of max_bytes (so that it is not rescanned on every write).
  void evict();
  void warn_once(BlockFileStatus cause, const std::filesystem::path& file);

  DiskTierOptions options_;
  BlockFileIdentity identity_;
  Hash128 root_key_;
  KvCacheStorage& storage_;
  size_t block_bytes_;
  bool device_pool_;  // the pool is in a device's memory: copies on the engine thread
  // Engine thread: each block's chained key (valid while the block is hashed).
  std::vector<Hash128> key_of_block_, parent_of_block_;
  std::vector<bool> key_valid_;
  BlockFileHeader staged_;  // fetch()'s find, for place()
  std::vector<uint8_t> staged_payload_;
  bool staged_ahead_ = false, staged_waited_ = false;  // read ahead; waited for
  std::set<BlockFileStatus> warned_;
  RestoreCost cost_;  // engine-thread reads and the engine's prefill rate
  std::unique_ptr<BlockPrefetcher> prefetch_;  // null: no reading ahead

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  uint64_t queued_bytes_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  // Keys known to be on disk (written, read or found at start): not written again.
  struct KeyHash {
    size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo); }
  };
  std::unordered_set<Hash128, KeyHash> on_disk_;
  uint64_t dir_bytes_ = 0;  // this tier's estimate; evict() rescans
  DiskTierStats stats_;
  uint64_t temp_counter_ = 0;  // the writer thread's
  bool write_warned_ = false;
  std::thread writer_;
};

}  // namespace pagellm
