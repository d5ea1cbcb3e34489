// Reads the disk tier's block files ahead of need (issue 54: "copies run off
// the engine thread"): when a request is queued, the engine thread asks for
// the files of the prompt's blocks that only the disk holds; a reader thread
// reads each file and checks it (kvcache/block_file.h) into a buffer of its
// own, bounded in bytes; when the sequence is admitted, the disk tier takes
// the checked bytes from here instead of reading the file on the engine
// thread. The reader never touches the KV pool; results cross threads only
// through this class's mutex (the reader catches everything it throws).
// Entries are held for their owners (requests); forget() drops an owner's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kvcache/block_file.h"

namespace pagellm {

// The whole file's bytes; nullopt (errno set) when it cannot be opened or
// read. A short read (injected: "disk.read") gives the bytes read so far.
std::optional<std::vector<uint8_t>> read_whole_file(const std::filesystem::path& path);

struct BlockPrefetchStats {
  uint64_t reads = 0;       // files read by the reader thread
  uint64_t read_bytes = 0;  // their bytes
  uint64_t dropped = 0;     // asked for but not queued: the staging bytes were taken
};

class BlockPrefetcher {
 public:
  // Runs on the reader thread before each read (tests: a slow disk).
  using ReadHook = std::function<void(const std::filesystem::path&)>;
  // Buffers at most `max_bytes` of payloads (`payload_bytes` each) at once.
  BlockPrefetcher(size_t payload_bytes, uint64_t max_bytes, ReadHook hook = {});
  ~BlockPrefetcher();  // drops what is queued, finishes the read under way
  BlockPrefetcher(const BlockPrefetcher&) = delete;
  BlockPrefetcher& operator=(const BlockPrefetcher&) = delete;

  // Queues a read of `path`, to be checked against `want`, for `owner`
  // (a block asked for already gains the owner). False: no room; not queued.
  bool request(uint64_t owner, const BlockFileHeader& want, const std::filesystem::path& path);
  // The owner's entries are dropped (a read under way is discarded).
  void forget(uint64_t owner);

  enum class Result {
    kNotAsked,  // no entry for the key
    kPending,   // queued or being read
    kReady,     // read and checked: `payload` holds it (the entry is gone)
    kRefused,   // the file failed a check: `status` says why (the entry is gone)
    kMissing,   // the file could not be read (the entry is gone)
  };
  struct Taken {
    Result result = Result::kNotAsked;
    std::vector<uint8_t> payload;
    BlockFileStatus status = BlockFileStatus::kOk;
    uint64_t file_bytes = 0;
    uint64_t bytes_ahead = 0;  // kPending: bytes the reader reads before it is done
  };
  // What there is for `key` now; with `until`, waits for a pending read up to then.
  Taken take(const Hash128& key,
             std::optional<std::chrono::steady_clock::time_point> until = std::nullopt);

  // The reader's measured rate (bytes per second, EWMA; 0: none read yet).
  double read_rate() const;
  BlockPrefetchStats stats() const;

 private:
  enum class State { kQueued, kReading, kDone };
  struct Entry {
    BlockFileHeader want;
    std::filesystem::path path;
    std::vector<uint64_t> owners;
    State state = State::kQueued;
    Result result = Result::kPending;
    std::vector<uint8_t> payload;
    BlockFileStatus status = BlockFileStatus::kOk;
    uint64_t file_bytes = 0;
  };
  struct KeyHash {
    size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo); }
  };
  void reader_loop();
  uint64_t bytes_ahead_locked(const Hash128& key) const;

  const size_t payload_bytes_;
  const uint64_t max_entries_;
  ReadHook hook_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // the reader: work queued
  std::condition_variable done_cv_;  // take(): a read finished
  std::unordered_map<Hash128, Entry, KeyHash> entries_;
  std::deque<Hash128> queue_;  // read order (entries gone or read already are skipped)
  bool stop_ = false;
  double rate_ = 0;
  BlockPrefetchStats stats_;
  std::thread reader_;
};

}  // namespace pagellm
