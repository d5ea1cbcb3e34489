#include "util/thread_pool.h"

#include <algorithm>
#include <exception>
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
// An owner claims a quarter of what is left in its range (at least one
// chunk): few calls while the range is long, single chunks at the end.
constexpr int64_t kClaimDivisor = 4;
constexpr int64_t kMaxChunks = int64_t{1} << 30;  // fits the 32-bit halves

inline uint64_t pack(int64_t front, int64_t back) {
  return static_cast<uint64_t>(back) << 32 | static_cast<uint64_t>(front);
}
inline int64_t front_of(uint64_t v) {
  return static_cast<int64_t>(v & 0xFFFFFFFFu);
}
inline int64_t back_of(uint64_t v) {
  return static_cast<int64_t>(v >> 32);
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (Job& job : jobs_) job.ranges = std::make_unique<Range[]>(static_cast<size_t>(n_threads_));
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

void ThreadPool::run_ranges(Job& job, int index) {
  Range& own = job.ranges[index];
  for (;;) {
    // Claim from the front of the own range.
    uint64_t v = own.bounds.load();
    int64_t f = front_of(v), b = back_of(v);
    if (f < b) {
      const int64_t take = std::max<int64_t>(1, (b - f) / kClaimDivisor);
      if (!own.bounds.compare_exchange_weak(v, pack(f + take, b))) continue;
      const int64_t lo = f * job.grain;
      const int64_t hi = std::min(job.n, (f + take) * job.grain);
      // An exception stays on the thread it was thrown on until the caller
      // rethrows it; the job's other chunks are then skipped, but counted.
      if (!job.failed.load()) {
        try {
          (*job.fn)(lo, hi, index);
        } catch (...) {
          bool first = false;
          if (job.failed.compare_exchange_strong(first, true)) job.error = std::current_exception();
        }
      }
      job.done.fetch_add(take);
      continue;
    }
    // Empty: steal the back half of the fullest other range and own it.
    int victim = -1;
    int64_t most = 0;
    for (int k = 1; k < n_threads_; ++k) {
      const int t = (index + k) % n_threads_;
      const uint64_t w = job.ranges[t].bounds.load();
      if (back_of(w) - front_of(w) > most) {
        most = back_of(w) - front_of(w);
        victim = t;
      }
    }
    if (victim < 0) return;  // nothing left anywhere (chunks may still be running)
    Range& other = job.ranges[victim];
    uint64_t w = other.bounds.load();
    f = front_of(w);
    b = back_of(w);
    if (f >= b) continue;
    const int64_t mid = f + (b - f) / 2;  // a single chunk is taken whole
    if (!other.bounds.compare_exchange_weak(w, pack(f, mid))) continue;
    // Nobody else writes an empty range, so a plain store publishes it.
    own.bounds.store(pack(mid, b));
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
    if (generation_.load() == gen) run_ranges(job, index);
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
  int64_t chunks = (n + grain - 1) / grain;
  if (chunks > kMaxChunks) {
    grain *= (chunks + kMaxChunks - 1) / kMaxChunks;
    chunks = (n + grain - 1) / grain;
  }
  const uint64_t gen = generation_.load() + 1;
  Job& job = jobs_[gen & 1];
  while (job.active.load() != 0) cpu_relax();  // a straggler from two jobs ago
  job.fn = &fn;
  job.n = n;
  job.grain = grain;
  job.chunks = chunks;
  for (int t = 0; t < n_threads_; ++t)
    job.ranges[t].bounds.store(pack(chunks * t / n_threads_, chunks * (t + 1) / n_threads_));
  job.done.store(0);
  {
    // Publishing under the lock pairs with the sleepers' predicate check.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.store(gen);
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  run_ranges(job, 0);
  while (job.done.load() != job.chunks) cpu_relax();
  if (job.failed.load()) {
    std::exception_ptr e = std::move(job.error);
    job.error = nullptr;
    job.failed.store(false);
    std::rethrow_exception(e);
  }
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
