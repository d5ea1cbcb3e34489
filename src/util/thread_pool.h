// A fixed pool of worker threads for data-parallel kernels. The calling thread
// takes part, so a pool of N threads starts N-1 workers. Work is split into
// static contiguous ranges (deterministic: a given output is always computed
// by the same code path, whatever the thread count). Workers spin briefly
// between jobs because decode issues hundreds of short jobs per token.
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
  // fn(begin, end, thread_index) processes items [begin, end).
  using RangeFn = std::function<void(int64_t, int64_t, int)>;

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Splits [0, n) into size() ranges whose bounds are multiples of `grain`
  // (except the last) and runs them in parallel. Returns when all are done.
  // Not re-entrant: call from one thread at a time.
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

  // Number of physical cores (distinct core ids in /proc/cpuinfo), at least 1.
  static int physical_cores();

 private:
  void worker_loop(int index);
  void run_share(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

}  // namespace pagellm
