// Dependent launches (pdl.h): on a GPU, chains of kernels that each read the
// previous one's output still see it (each waits in pdl_start), and Hopper
// GPUs take them.
#include "backend/cuda/pdl.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/ops.h"
#include "cuda_test_util.h"

namespace pagellm::cuda {
namespace {

TEST(CudaPdl, HopperTakesDependentLaunches) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  if (const char* e = std::getenv("PAGELLM_CUDA_PDL"); e && std::string(e) == "0")
    GTEST_SKIP() << "PAGELLM_CUDA_PDL=0";
  if (dev.compute_capability() < 90) {
    EXPECT_FALSE(pdl_enabled(dev));
    GTEST_SKIP() << "sm_" << dev.compute_capability() << ": no dependent launches";
  }
  EXPECT_TRUE(pdl_enabled(dev)) << "the probe failed: kernels run as plain launches";
}

// x += y 200 times as a chain of dependent kernels with no host sync between
// them: every step must see the one before.
TEST(CudaPdl, ChainedKernelsSeeEachOthersWrites) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t n = 1 << 20;
  std::vector<float> x(n, 1.0f), y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(i % 7);
  DeviceBuffer dx = test::upload(dev, x), dy = test::upload(dev, y);
  for (int k = 0; k < 200; ++k) add_inplace(dev, dx.as<float>(), dy.as<float>(), n);
  const auto got = test::download<float>(dev, dx, n);
  for (int64_t i = 0; i < n; i += 4099)
    ASSERT_EQ(got[i], 1.0f + 200.0f * static_cast<float>(i % 7)) << i;
}

}  // namespace
}  // namespace pagellm::cuda
