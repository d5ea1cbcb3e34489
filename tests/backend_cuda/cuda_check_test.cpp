// Host-side tests of the CUDA backend's plumbing: they run without a GPU.
#include "backend/cuda/cuda_check.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_device.h"
#include "cuda_test_util.h"

namespace pagellm::cuda {
namespace {

TEST(CudaCheck, MessageNamesCallDeviceAndReason) {
  EXPECT_EQ(cuda_error_message("cudaMalloc(1048576 bytes)", 0, "out of memory"),
            "cudaMalloc(1048576 bytes) on cuda:0: out of memory");
  EXPECT_EQ(cuda_error_message("cudaGetDeviceCount", -1, "no CUDA-capable device is detected"),
            "cudaGetDeviceCount on the CUDA runtime: no CUDA-capable device is detected");
}

TEST(CudaCheck, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(check_cuda(0, "cudaFree", 0));
  EXPECT_NO_THROW(check_cublas(0, "cublasGemmEx", 0));
}

TEST(CudaCheck, FakeOutOfMemoryCode) {
  // cudaErrorMemoryAllocation == 2 (a stable value of the runtime API).
  try {
    check_cuda(2, "cudaMalloc(1048576 bytes)", 1);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_EQ(std::string(e.what()), "cudaMalloc(1048576 bytes) on cuda:1: out of memory");
    EXPECT_EQ(e.code(), 2);
  }
}

TEST(CudaCheck, IsAPagellmError) {
  EXPECT_THROW(check_cuda(2, "cudaMalloc", 0), Error);
}

TEST(CudaCheck, FakeCublasStatus) {
  // CUBLAS_STATUS_ALLOC_FAILED == 3.
  try {
    check_cublas(3, "cublasCreate", 0);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("cublasCreate on cuda:0: CUBLAS_STATUS_ALLOC_FAILED", 0), 0u) << msg;
    EXPECT_EQ(e.code(), 3);
  }
}

TEST(CudaCheck, UnknownCodesStillFormat) {
  EXPECT_FALSE(cuda_error_string(987654).empty());
  EXPECT_FALSE(cublas_status_string(987654).empty());
}

TEST(CudaDevice, CountNeverThrows) {
  int n = -1;
  EXPECT_NO_THROW(n = cuda_device_count());
  EXPECT_GE(n, 0);
}

TEST(CudaDevice, MissingDeviceThrowsCudaError) {
  const int n = cuda_device_count();
  try {
    CudaDevice dev(n);  // one past the last
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:" + std::to_string(n) + " is not there"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(CudaDevice(-1), CudaError);
}

TEST(CudaDevice, CheckedBytes) {
  EXPECT_EQ(checked_bytes(0, 4), 0u);
  EXPECT_EQ(checked_bytes(1 << 20, 4), size_t{4} << 20);
  EXPECT_EQ(checked_bytes(int64_t{3} << 40, 2), size_t{6} << 40);
  EXPECT_THROW(checked_bytes(-1, 4), CudaError);
  EXPECT_THROW(checked_bytes(INT64_MAX, 4), CudaError);
}

TEST(CudaDevice, EmptyBufferNeedsNoDevice) {
  DeviceBuffer b;
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.bytes(), 0u);
  DeviceBuffer c(std::move(b));
  EXPECT_EQ(c.data(), nullptr);
  c.reset();
}

TEST(CudaDevice, BufferRoundTrip) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  DeviceBuffer b = test::upload(dev, v);
  EXPECT_EQ(test::download<float>(dev, b, v.size()), v);
  dev.fill_zero(b.data(), 4 * sizeof(float));
  const auto z = test::download<float>(dev, b, v.size());
  EXPECT_EQ(z[3], 0.0f);
  EXPECT_EQ(z[4], 2.0f);
  b.reserve(dev, 100);  // no shrink
  EXPECT_GE(b.bytes(), 4000u);
  EXPECT_FALSE(dev.name().empty());
  EXPECT_GE(dev.compute_capability(), 50);
}

TEST(CudaDevice, OutOfMemoryNamesTheCall) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const size_t huge = size_t{1} << 50;  // 1 PiB
  try {
    DeviceBuffer b(dev, huge);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc(1125899906842624 bytes) on cuda:0"),
              std::string::npos)
        << e.what();
  }
  // The device is still usable after the failure.
  DeviceBuffer ok(dev, 1024);
  dev.synchronize();
}

}  // namespace
}  // namespace pagellm::cuda
