// CUDA GEMV (decode) and cuBLAS GEMM (prefill) against a double-precision
// product of the exact weight values (dequantize_row), for every weight type.
#include <gtest/gtest.h>

#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv.h"
#include "cuda_test_util.h"

namespace pagellm::cuda {
namespace {

using test::download;
using test::upload;

std::vector<float> reference(const std::vector<float>& w, int64_t rows, int64_t cols,
                             const std::vector<float>& x, int64_t x_stride, int64_t n,
                             int64_t y_stride) {
  std::vector<float> y(static_cast<size_t>(n * y_stride), 0.0f);
  for (int64_t v = 0; v < n; ++v)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c)
        s += static_cast<double>(w[r * cols + c]) * x[v * x_stride + c];
      y[v * y_stride + r] = static_cast<float>(s);
    }
  return y;
}

TEST(CudaGemv, EveryTypeMatchesReference) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t rows = 301, cols = 1024;
  for (DType type : test::cuda_weight_types()) {
    for (int32_t n : {1, 3, 8, 11}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " x" + std::to_string(n));
      const auto w = test::make_weights(type, rows, cols, 31);
      const int64_t x_stride = cols + 4, y_stride = rows + 3;
      const auto x = test::random_floats(n * x_stride, 32 + n);
      const auto want = reference(w.values, rows, cols, x, x_stride, n, y_stride);
      DeviceBuffer dw = upload(dev, w.bytes), dx = upload(dev, x);
      DeviceBuffer dy(dev, want.size() * sizeof(float));
      dev.fill_zero(dy.data(), dy.bytes());
      gemv(dev, type, dw.data(), rows, cols, dx.as<float>(), x_stride, dy.as<float>(), y_stride, n);
      EXPECT_LE(test::rel_error(download<float>(dev, dy, want.size()), want), 1e-5);
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
    const auto want = reference(w.values, rows, cols, x, x_stride, n, y_stride);
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
