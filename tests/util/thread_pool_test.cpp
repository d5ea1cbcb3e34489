#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace pagellm {

TEST(ThreadPool, CoversEveryItemExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 64, 1000}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e, int) {
              for (int64_t i = b; i < e; ++i) hits[i]++;
            },
            grain);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
      }
    }
  }
}

TEST(ThreadPool, ManyShortJobs) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 5000; ++rep)
    pool.parallel_for(4, [&](int64_t b, int64_t e, int) { sum += e - b; });
  EXPECT_EQ(sum.load(), 5000 * 4);
}

TEST(ThreadPool, CallBoundsAreMultiplesOfTheGrain) {
  ThreadPool pool(3);
  for (int64_t n : {5, 100, 1001}) {
    for (int64_t grain : {1, 3, 8}) {
      std::atomic<bool> ok{true};
      pool.parallel_for(
          n,
          [&](int64_t b, int64_t e, int) {
            if (b % grain != 0 || (e != n && e % grain != 0) || b >= e || e > n) ok = false;
          },
          grain);
      EXPECT_TRUE(ok.load()) << n << " " << grain;
    }
  }
}

TEST(ThreadPool, ThreadIndicesAreUniqueAmongRunningCalls) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> running(4);
  std::atomic<bool> ok{true};
  pool.parallel_for(400, [&](int64_t, int64_t, int t) {
    if (t < 0 || t >= 4 || running[t].fetch_add(1) != 0) ok = false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    running[t].fetch_sub(1);
  });
  EXPECT_TRUE(ok.load());
}

// A thread that stalls mid-job (as when another process holds its core) has
// the rest of its range taken over: the others do most of the work.
TEST(ThreadPool, AStalledThreadsRangeIsTakenOver) {
  ThreadPool pool(2);
  std::atomic<int64_t> by_thread[2] = {0, 0};
  std::atomic<bool> stalled{false};
  pool.parallel_for(1000, [&](int64_t b, int64_t e, int t) {
    if (t == 1 && !stalled.exchange(true))
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    by_thread[t] += e - b;
    std::this_thread::sleep_for(std::chrono::microseconds(20 * (e - b)));
  });
  EXPECT_EQ(by_thread[0] + by_thread[1], 1000);
  // Thread 1 owns [500, 1000) but sleeps 200 ms in its first call, which
  // holds at most a quarter of its range; thread 0 needs ~20 ms per 1000 items.
  if (stalled.load()) {
    EXPECT_GT(by_thread[0].load(), 800);
  }
}

// A throwing call, on a worker or on the caller, comes back to the caller as
// that exception once the job is over; the pool works on afterwards.
TEST(ThreadPool, AnExceptionReachesTheCallerAndThePoolGoesOn) {
  ThreadPool pool(3);
  for (int64_t bad : {0, 500, 999}) {
    std::atomic<int> running{0};
    bool caught = false;
    try {
      pool.parallel_for(1000, [&](int64_t b, int64_t e, int) {
        running++;
        std::this_thread::sleep_for(std::chrono::microseconds(10));
        running--;
        if (b <= bad && bad < e) throw std::runtime_error("item " + std::to_string(bad));
      });
    } catch (const std::runtime_error& err) {
      caught = true;
      EXPECT_EQ(std::string(err.what()), "item " + std::to_string(bad));
      EXPECT_EQ(running.load(), 0);  // nothing of the job still runs
    }
    EXPECT_TRUE(caught) << bad;
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, [&](int64_t b, int64_t e, int) { sum += e - b; });
    EXPECT_EQ(sum.load(), 100);
  }
}

TEST(ThreadPool, PhysicalCoresPositive) {
  EXPECT_GE(ThreadPool::physical_cores(), 1);
}

}  // namespace pagellm
