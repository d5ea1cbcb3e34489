#include "util/thread_pool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pagellm {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_share(int index) {
  int64_t chunks = (job_n_ + job_grain_ - 1) / job_grain_;
  int64_t per = chunks / n_threads_, extra = chunks % n_threads_;
  int64_t c0 = index * per + std::min<int64_t>(index, extra);
  int64_t c1 = c0 + per + (index < extra ? 1 : 0);
  int64_t b = c0 * job_grain_, e = std::min(job_n_, c1 * job_grain_);
  if (b < e) (*job_)(b, e, index);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    int spins = 0;
    while (gen == seen && spins < kSpinIterations) {
      cpu_relax();
      ++spins;
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      sleepers_.fetch_sub(1);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    run_share(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  {
    // Publishing under the lock pairs with the sleepers' predicate check.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  run_share(0);
  while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
  job_ = nullptr;
}

int ThreadPool::physical_cores() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string val = line.substr(colon + 1);
    if (key == "physical id") phys = val;
    if (key == "core id") cores.insert({phys, val});
  }
  int n = static_cast<int>(cores.size());
  if (n < 1) n = static_cast<int>(std::thread::hardware_concurrency());
  return n < 1 ? 1 : n;
}

}  // namespace pagellm
