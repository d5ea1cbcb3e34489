// A fixed pool of worker threads for data-parallel kernels. The calling thread
// takes part, so a pool of N threads starts N-1 workers.
//
// A job [0, n) is cut into contiguous shares (multiples of `grain`) that any
// thread may claim; the caller claims too, so when a worker is not scheduled
// (another process holds the core) the caller does its share instead of
// waiting for it. Which thread runs a share never changes what is computed:
// kernels split work across outputs, never across one output's reduction.
// Workers spin briefly between jobs because decode issues hundreds of short
// jobs per token, then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pagellm {

class ThreadPool {
 public:
  // fn(begin, end, thread_index) processes items [begin, end); thread_index
  // is in [0, size()) and unique among the threads running at the same time.
  using RangeFn = std::function<void(int64_t, int64_t, int)>;

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn over [0, n) in shares whose bounds are multiples of `grain`
  // (except the last). Returns when all are done. Not re-entrant: call from
  // one thread at a time.
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

  // Number of physical cores (distinct core ids in /proc/cpuinfo), at least 1.
  static int physical_cores();

 private:
  // Jobs alternate between two slots so a late worker never reads a slot
  // that is being rewritten (the caller waits for the slot's `active` to drain).
  struct Job {
    const RangeFn* fn = nullptr;
    int64_t n = 0;
    int64_t grain = 1;
    int64_t shares = 0;
    int64_t share_chunks = 1;  // grains per share
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::atomic<int> active{0};
  };

  void worker_loop(int index);
  void run_shares(Job& job, int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  Job jobs_[2];
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

}  // namespace pagellm
