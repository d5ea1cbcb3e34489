// The thread pool the kernel benchmarks run on: PAGELLM_BENCH_THREADS threads
// (default 2, the machine the figures in the README come from).
#pragma once

#include <algorithm>
#include <cstdlib>

#include "util/thread_pool.h"

namespace pagellm::bench {

inline int bench_threads() {
  const char* s = std::getenv("PAGELLM_BENCH_THREADS");
  return s ? std::max(1, std::atoi(s)) : 2;
}

inline ThreadPool& pool() {
  static ThreadPool p(bench_threads());
  return p;
}

}  // namespace pagellm::bench
