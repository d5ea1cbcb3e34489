// A fixed pool of worker threads for data-parallel kernels. The calling thread
// takes part, so a pool of N threads starts N-1 workers.
//
// A job [0, n) is cut into chunks of `grain` items, and each thread owns one
// contiguous range of chunks, which it runs front to back in claims that
// shrink as the range empties (so the weights a kernel streams stay one
// forward stream per thread, which its prefetching follows). A thread that
// runs out steals the back half of another thread's remaining range and runs
// it as its own; the caller takes part, so when a worker is not scheduled
// (another process holds the core) its range is taken over instead of waited
// for, and threads finish within about one chunk of each other. Which thread
// runs a chunk never changes what is computed: kernels split work across
// outputs, never across one output's reduction. Workers spin briefly between
// jobs because decode issues hundreds of short jobs per token, then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
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

  // Runs fn over [0, n) in calls whose bounds are multiples of `grain`
  // (except the last). Returns when all are done. If a call throws (on any
  // thread), the job's remaining calls are skipped and the first exception is
  // rethrown here, on the caller's thread, once no thread still runs the job. Not re-entrant: call
  // from one thread at a time.
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

  // Number of physical cores (distinct core ids in /proc/cpuinfo), at least 1.
  static int physical_cores();

 private:
  // Jobs alternate between two slots so a late worker never reads a slot
  // that is being rewritten (the caller waits for the slot's `active` to drain).
  // One thread's remaining chunks [front, back), packed as back << 32 | front
  // so that the owner (taking from the front) and thieves (taking the back
  // half) update it with one compare-and-swap.
  struct alignas(64) Range {
    std::atomic<uint64_t> bounds{0};
  };
  struct Job {
    const RangeFn* fn = nullptr;
    int64_t n = 0;
    int64_t grain = 1;
    int64_t chunks = 0;
    std::unique_ptr<Range[]> ranges;  // one per thread
    std::atomic<int64_t> done{0};     // chunks completed (or skipped after a failure)
    std::atomic<int> active{0};
    std::atomic<bool> failed{false};  // a call threw: `error` holds the first exception
    std::exception_ptr error;
  };

  void worker_loop(int index);
  void run_ranges(Job& job, int index);

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
