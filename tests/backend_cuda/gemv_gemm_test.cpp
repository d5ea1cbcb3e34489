// CUDA GEMV (decode) and cuBLAS GEMM (prefill) against a double-precision
// product of the exact weight values (dequantize_row), for every weight type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv.h"
#include "cuda_test_util.h"

namespace pagellm::cuda {
namespace {

using test::download;
using test::reference_product;
using test::upload;

TEST(CudaGemv, EveryTypeMatchesReference) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t rows = 301, cols = 1024;
  for (DType type : test::cuda_weight_types()) {
    for (int32_t n : {1, 3, 8, 11, 16, 17, 40}) {  // 17, 40: more than one launch
      SCOPED_TRACE(std::string(dtype_name(type)) + " x" + std::to_string(n));
      const auto w = test::make_weights(type, rows, cols, 31);
      const int64_t x_stride = cols + 4, y_stride = rows + 3;
      const auto x = test::random_floats(n * x_stride, 32 + n);
      const auto want = reference_product(w.values, rows, cols, x, x_stride, n, y_stride);
      DeviceBuffer dw = upload(dev, w.bytes), dx = upload(dev, x);
      DeviceBuffer dy(dev, want.size() * sizeof(float));
      dev.fill_zero(dy.data(), dy.bytes());
      gemv(dev, type, dw.data(), rows, cols, dx.as<float>(), x_stride, dy.as<float>(), y_stride, n);
      EXPECT_LE(test::rel_error(download<float>(dev, dy, want.size()), want), 1e-5);
    }
  }
}

// A vector's product does not depend on how many others share the call.
TEST(CudaGemv, ResultsDoNotDependOnTheBatch) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t rows = 129, cols = 512, n = 40;
  for (DType type : test::cuda_weight_types()) {
    SCOPED_TRACE(dtype_name(type));
    const auto w = test::make_weights(type, rows, cols, 61);
    const auto x = test::random_floats(n * cols, 62);
    DeviceBuffer dw = upload(dev, w.bytes), dx = upload(dev, x);
    DeviceBuffer all(dev, n * rows * sizeof(float)), one(dev, rows * sizeof(float));
    gemv(dev, type, dw.data(), rows, cols, dx.as<float>(), cols, all.as<float>(), rows, n);
    const auto together = download<float>(dev, all, n * rows);
    for (int64_t v : {0, 15, 16, 39}) {
      gemv(dev, type, dw.data(), rows, cols, dx.as<float>() + v * cols, cols, one.as<float>(), rows,
           1);
      const auto alone = download<float>(dev, one, rows);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + v * rows))
          << "vector " << v;
    }
  }
}

TEST(CudaGemm, EveryTypeMatchesReference) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  GemmWorkspace ws;
  const int64_t rows = 257, cols = 768, n = 37;
  for (DType type : test::cuda_weight_types()) {
    SCOPED_TRACE(dtype_name(type));
    const auto w = test::make_weights(type, rows, cols, 41);
    const int64_t x_stride = cols + 8, y_stride = rows + 7;
    const auto x = test::random_floats(n * x_stride, 42);
    const auto want = reference_product(w.values, rows, cols, x, x_stride, n, y_stride);
    DeviceBuffer dw = upload(dev, w.bytes), dx = upload(dev, x);
    DeviceBuffer dy(dev, want.size() * sizeof(float));
    dev.fill_zero(dy.data(), dy.bytes());
    gemm(dev, ws, type, dw.data(), rows, cols, dx.as<float>(), x_stride, n, dy.as<float>(),
         y_stride);
    // W and X rounded to f16 (11-bit significands), f32 accumulation.
    const double tol = type == DType::BF16 || type == DType::F32 ? 5e-3 : 3e-3;
    EXPECT_LE(test::rel_error(download<float>(dev, dy, want.size()), want), tol);
  }
}

// Rows of X beyond f16's range (|x| up to 1e9) are scaled into it and back:
// finite, and as close to the reference as rows within range.
TEST(CudaGemm, ActivationsBeyondTheF16RangeStayAccurate) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  GemmWorkspace ws;
  const int64_t rows = 96, cols = 512, n = 12;
  const auto w = test::make_weights(DType::Q8_0, rows, cols, 71);
  auto x = test::random_floats(n * cols, 72);
  for (int64_t c = 0; c < cols; ++c) {
    x[3 * cols + c] *= 1e6f;  // a whole row large
    x[7 * cols + c] *= 3e4f;  // just past 2^15 here and there
  }
  x[9 * cols + 17] = 1e9f;  // one huge value in a normal row
  const auto want = reference_product(w.values, rows, cols, x, cols, n, rows);
  DeviceBuffer dw = upload(dev, w.bytes), dx = upload(dev, x);
  DeviceBuffer dy(dev, want.size() * sizeof(float));
  gemm(dev, ws, DType::Q8_0, dw.data(), rows, cols, dx.as<float>(), cols, n, dy.as<float>(), rows);
  const auto got = download<float>(dev, dy, want.size());
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<float> g(got.begin() + t * rows, got.begin() + (t + 1) * rows);
    const std::vector<float> e(want.begin() + t * rows, want.begin() + (t + 1) * rows);
    for (float v : g) ASSERT_TRUE(std::isfinite(v)) << "row " << t;
    EXPECT_LE(test::rel_error(g, e), 3e-3) << "row " << t;
  }
}

TEST(CudaGemm, DequantizeToF16MatchesCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t rows = 9, cols = 512;
  for (DType type : test::cuda_weight_types()) {
    SCOPED_TRACE(dtype_name(type));
    const auto w = test::make_weights(type, rows, cols, 51);
    DeviceBuffer dw = upload(dev, w.bytes), out(dev, rows * cols * 2);
    dequantize_to_f16(dev, type, dw.data(), rows, cols, out.data());
    const auto h = download<uint16_t>(dev, out, rows * cols);
    std::vector<float> got(h.size());
    dequantize_row(DType::F16, h.data(), got.data(), rows * cols);
    std::vector<uint16_t> want_h(h.size());
    quantize_row(DType::F16, w.values.data(), want_h.data(), rows * cols);
    EXPECT_TRUE(h == want_h);  // the same values rounded to f16 the same way
  }
}

}  // namespace
}  // namespace pagellm::cuda
