#include "util/thread_pool.h"

#include <algorithm>
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
constexpr int64_t kSharesPerThread = 4;
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

void ThreadPool::run_shares(Job& job, int index) {
  for (;;) {
    const int64_t s = job.next.fetch_add(1);
    if (s >= job.shares) return;
    const int64_t b = s * job.share_chunks * job.grain;
    const int64_t e = std::min(job.n, (s + 1) * job.share_chunks * job.grain);
    if (b < e) (*job.fn)(b, e, index);
    job.done.fetch_add(1);
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load();
    for (int spins = 0; gen == seen && spins < kSpinIterations; ++spins) {
      cpu_relax();
      gen = generation_.load();
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      gen = generation_.load();
    }
    seen = gen;
    if (stop_.load()) return;
    Job& job = jobs_[gen & 1];
    job.active.fetch_add(1);
    // Still the current job? If not, the caller may be rewriting this slot.
    if (generation_.load() == gen) run_shares(job, index);
    job.active.fetch_sub(1);
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  const uint64_t gen = generation_.load() + 1;
  Job& job = jobs_[gen & 1];
  while (job.active.load() != 0) cpu_relax();  // a straggler from two jobs ago
  const int64_t chunks = (n + grain - 1) / grain;
  const int64_t shares = std::min<int64_t>(chunks, n_threads_ * kSharesPerThread);
  job.fn = &fn;
  job.n = n;
  job.grain = grain;
  job.share_chunks = (chunks + shares - 1) / shares;
  job.shares = (chunks + job.share_chunks - 1) / job.share_chunks;
  job.done.store(0);
  job.next.store(0);
  {
    // Publishing under the lock pairs with the sleepers' predicate check.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.store(gen);
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  run_shares(job, 0);
  while (job.done.load() != job.shares) cpu_relax();
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
