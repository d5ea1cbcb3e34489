// The CUDA operation profile (op_profile.h): its table from known samples on
// the host; on a GPU, the events' brackets (nested calls count as their
// caller's).
#include "backend/cuda/op_profile.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace pagellm::cuda {
namespace {

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(OpStats, TableListsTheLargestTotalFirstWithMeansAndShares) {
  OpStats st;
  st.add("kv_write [1]", 0.5);
  st.add("matmul Q4_0 x3 [1]", 2.0);
  st.add("matmul Q4_0 x3 [1]", 4.0);
  st.add("rope [1]", 1.5);
  EXPECT_DOUBLE_EQ(st.total_ms(), 8.0);
  const auto t = lines(st.table());
  ASSERT_EQ(t.size(), 5u);  // header, three operations, the total
  EXPECT_NE(t[0].find("operation"), std::string::npos);
  EXPECT_EQ(t[1].rfind("matmul Q4_0 x3 [1]", 0), 0u) << t[1];
  EXPECT_EQ(t[2].rfind("rope [1]", 0), 0u) << t[2];
  EXPECT_EQ(t[3].rfind("kv_write [1]", 0), 0u) << t[3];
  // matmul: 2 calls, 6 ms, a mean of 3000 us, 75% of the 8 ms.
  std::istringstream row(t[1].substr(std::string("matmul Q4_0 x3 [1]").size()));
  int64_t calls = 0;
  double total = 0, mean = 0;
  std::string share;
  row >> calls >> total >> mean >> share;
  EXPECT_EQ(calls, 2);
  EXPECT_DOUBLE_EQ(total, 6.0);
  EXPECT_DOUBLE_EQ(mean, 3000.0);
  EXPECT_EQ(share, "75.0%");
  EXPECT_EQ(t[4].rfind("all", 0), 0u);
  EXPECT_NE(t[4].find("8.000"), std::string::npos) << t[4];
}

TEST(OpProfile, BracketsTopLevelOperationsOnTheStream) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  OpProfile p(dev);
  DeviceBuffer b(dev, size_t{64} << 20);
  for (int i = 0; i < 3; ++i) {
    p.begin("outer");
    p.begin("inner");  // nested: counted as the outer operation's
    dev.fill_zero(b.data(), b.bytes());
    p.end();
    p.end();
  }
  p.end();  // unmatched: ignored
  p.collect();
  const auto t = lines(p.stats().table());
  ASSERT_EQ(t.size(), 3u) << p.stats().table();
  EXPECT_EQ(t[1].rfind("outer", 0), 0u);
  EXPECT_GT(p.stats().total_ms(), 0.0);
}

}  // namespace
}  // namespace pagellm::cuda
