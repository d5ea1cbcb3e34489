// Host-side checks of the CUDA kernels' arguments and scratch sizes: they run
// before any CUDA call, so these tests run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/kv_write.h"
#include "backend/cuda/paged_attention.h"
#include "cuda_test_util.h"
#include "device/device.h"
#include "util/error.h"

namespace pagellm::cuda {
namespace {

// The planner's list of what CUDA devices run (device/device.h) is this
// backend's.
TEST(CudaValidation, PlannerKnowsTheWeightTypes) {
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = dtype_traits_of(id);
    if (!tr) continue;
    EXPECT_EQ(device_runs_weight_type(DeviceKind::kCuda, tr->type),
              cuda_supports_weight_type(tr->type))
        << tr->name;
  }
}

TEST(CudaValidation, WeightTypes) {
  for (DType t : test::cuda_weight_types())
    EXPECT_TRUE(cuda_supports_weight_type(t)) << dtype_name(t);
  // The activation formats of the CPU's dot products are not weight types.
  for (DType t : {DType::Q8_1, DType::Q8_K})
    EXPECT_FALSE(cuda_supports_weight_type(t)) << dtype_name(t);
  EXPECT_NO_THROW(validate_weight_shape(DType::Q4_K, 10, 4096));
  EXPECT_THROW(validate_weight_shape(DType::Q4_K, 10, 4000), ConfigError);  // not 256-aligned
  EXPECT_THROW(validate_weight_shape(DType::F16, 10, 100), ConfigError);    // not 32-aligned
  EXPECT_THROW(validate_weight_shape(DType::IQ4_XS, 10, 4000), ConfigError);
  EXPECT_NO_THROW(validate_weight_shape(DType::IQ4_NL, 10, 4000));  // 32-element blocks
  EXPECT_THROW(validate_weight_shape(DType::Q8_K, 10, 4096), ConfigError);
  try {
    validate_weight_shape(DType::Q8_K, 1, 256);
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "CUDA backend: weight type q8_k is not supported");
  }
}

TEST(CudaValidation, GemmScratchBytes) {
  EXPECT_EQ(gemm_weight_scratch_bytes(DType::F16, 4096, 4096), 0u);  // used in place
  EXPECT_EQ(gemm_weight_scratch_bytes(DType::Q4_0, 4096, 11008), size_t{4096} * 11008 * 2);
  EXPECT_EQ(gemm_activation_scratch_bytes(512, 4096), size_t{512} * 4096 * 2);
  EXPECT_THROW(gemm_weight_scratch_bytes(DType::Q8_0, INT64_MAX / 2, 4096), CudaError);
}

TEST(CudaValidation, KvWrite) {
  KvWriteArgs a;
  a.n_tokens = 3;
  a.n_kv_heads = 4;
  a.head_dim = 64;
  a.cache_type = DType::Q8_0;
  EXPECT_NO_THROW(validate(a));
  a.head_dim = 80;
  EXPECT_THROW(validate(a), ConfigError);
  a.cache_type = DType::F16;
  EXPECT_NO_THROW(validate(a));
  a.cache_type = DType::Q4_0;
  EXPECT_THROW(validate(a), ConfigError);
}

TEST(CudaValidation, PagedAttention) {
  PagedAttentionArgs a;
  a.n_tokens = 1;
  a.n_heads = 32;
  a.n_kv_heads = 8;
  a.head_dim = 128;
  EXPECT_NO_THROW(validate(a));
  a.head_dim = 80;  // f16: any size up to 512
  EXPECT_NO_THROW(validate(a));
  a.kv_type = DType::Q8_0;
  EXPECT_THROW(validate(a), ConfigError);
  a.kv_type = DType::F16;
  a.head_dim = 512;  // Gemma 4's global layers
  EXPECT_NO_THROW(validate(a));
  a.head_dim = 544;  // values past 512 (only a latent cache's rows are longer)
  EXPECT_THROW(validate(a), ConfigError);
  a.head_dim = 128;
  a.n_kv_heads = 5;  // 32 % 5 != 0
  EXPECT_THROW(validate(a), ConfigError);
  a.n_kv_heads = 8;
  a.kv_type = DType::BF16;
  EXPECT_THROW(validate(a), ConfigError);
}

// The kernels' dequantization code, run on the host, against the CPU's
// dequantize_row: the block layouts of every type, checked without a GPU.
TEST(CudaValidation, DeviceDequantizationLayoutsOnHost) {
  const int64_t cols = 1024;
  for (DType type : test::cuda_weight_types()) {
    const test::HostWeights w = test::make_weights(type, 3, cols, 61);
    std::vector<float> got(static_cast<size_t>(3 * cols));
    for (int r = 0; r < 3; ++r)
      dequantize_row_host(type, w.bytes.data() + r * dtype_row_bytes(type, cols), cols,
                          got.data() + r * cols);
    EXPECT_EQ(got, w.values) << dtype_name(type);
  }
}

// The GEMV kernel's per-lane code and warp sum, run on the host, against a
// double-precision product of the exact weights: the quad indexing of W and x
// of every type, strides and several passes of vectors, without a GPU.
TEST(CudaValidation, GemvLaneCodeOnHost) {
  const int64_t rows = 38, cols = 768;  // 38: a last warp of 2 rows when it takes 4
  for (DType type : test::cuda_weight_types()) {
    const test::HostWeights w = test::make_weights(type, rows, cols, 71);
    // 18, 19: two passes of at most 16 vectors, the second with 1 or 4 rows per warp
    for (int32_t n : {1, 3, 18, 19}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " x" + std::to_string(n));
      const int64_t x_stride = cols + 4, y_stride = rows + 3;
      const std::vector<float> x = test::random_floats(static_cast<size_t>(n * x_stride), 72 + n);
      const std::vector<float> want =
          test::reference_product(w.values, rows, cols, x, x_stride, n, y_stride);
      std::vector<float> got(want.size(), 0.0f);
      gemv_rows_host(type, w.bytes.data(), rows, cols, x.data(), x_stride, got.data(), y_stride, n);
      EXPECT_LE(test::rel_error(got, want), 1e-5);
    }
  }
}

// One vector alone (one row per warp) and in a batch of 19 (four rows per
// warp, two passes) gives the same bits: the kernel's batch invariance, in
// its host rendition.
TEST(CudaValidation, GemvLaneCodeIsBatchInvariantOnHost) {
  const int64_t rows = 39, cols = 512, n = 19;
  for (DType type : test::cuda_weight_types()) {
    SCOPED_TRACE(dtype_name(type));
    const test::HostWeights w = test::make_weights(type, rows, cols, 91);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(n * cols), 92);
    std::vector<float> all(static_cast<size_t>(n * rows)), one(static_cast<size_t>(rows));
    gemv_rows_host(type, w.bytes.data(), rows, cols, x.data(), cols, all.data(), rows, n);
    for (int64_t v : {0, 2, 15, 16, 18}) {
      gemv_rows_host(type, w.bytes.data(), rows, cols, x.data() + v * cols, cols, one.data(), rows,
                     1);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + v * rows)) << "vector " << v;
    }
  }
}

// MXFP4 rows of an odd number of 17-byte blocks start at odd addresses (the
// type needs no alignment): the kernels' byte loads read them as the CPU does.
TEST(CudaValidation, Mxfp4RowsAtOddAddressesOnHost) {
  const int64_t rows = 5, cols = 96;  // 3 blocks: 51-byte rows
  const test::HostWeights w = test::make_weights(DType::MXFP4, rows, cols, 93);
  std::vector<uint8_t> shifted(w.bytes.size() + 1);
  std::copy(w.bytes.begin(), w.bytes.end(), shifted.begin() + 1);  // row 0 odd, too
  std::vector<float> got(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row_host(DType::MXFP4, shifted.data() + 1 + r * 51, cols, got.data() + r * cols);
  EXPECT_EQ(got, w.values);
  const std::vector<float> x = test::random_floats(static_cast<size_t>(cols), 94);
  const std::vector<float> want = test::reference_product(w.values, rows, cols, x, cols, 1, rows);
  std::vector<float> y(static_cast<size_t>(rows));
  EXPECT_NO_THROW(validate_weight_pointer(DType::MXFP4, shifted.data() + 1));
  gemv_rows_host(DType::MXFP4, shifted.data() + 1, rows, cols, x.data(), cols, y.data(), rows, 1);
  EXPECT_LE(test::rel_error(y, want), 1e-5);
}

TEST(CudaValidation, GemvRefusesMisalignedOperands) {
  const test::HostWeights w = test::make_weights(DType::Q4_0, 4, 64, 81);
  std::vector<uint8_t> shifted(w.bytes.size() + 1);
  std::vector<float> x(130), y(8);
  EXPECT_THROW(gemv_rows_host(DType::Q4_0, shifted.data() + 1, 4, 64, x.data(), 64, y.data(), 4, 1),
               ConfigError);
  EXPECT_THROW(gemv_rows_host(DType::Q4_0, w.bytes.data(), 4, 64, x.data() + 1, 64, y.data(), 4, 1),
               ConfigError);
  EXPECT_THROW(gemv_rows_host(DType::Q4_0, w.bytes.data(), 4, 64, x.data(), 65, y.data(), 4, 2),
               ConfigError);
  EXPECT_NO_THROW(gemv_rows_host(DType::Q4_0, w.bytes.data(), 4, 64, x.data(), 64, y.data(), 4, 2));
  try {
    validate_weight_pointer(DType::Q8_0, shifted.data() + 1);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "CUDA backend: q8_0 weights at an address that is not 2-aligned");
  }
}

}  // namespace
}  // namespace pagellm::cuda
