#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

TEST(ThreadPool, PhysicalCoresPositive) {
  EXPECT_GE(ThreadPool::physical_cores(), 1);
}

}  // namespace pagellm
