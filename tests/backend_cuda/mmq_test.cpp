// The int8 tensor-core product (mmq.h): its host rendition (the kernel's
// per-lane code, the mma emulated from its fragment layout) against a
// double-precision product of the weights and the activation codes, against
// the int8 GEMV's rendition, and for batch invariance; on a GPU, the kernel
// against its rendition bit for bit.
#include "backend/cuda/mmq.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/gemv_q8.h"
#include "cuda_test_util.h"
#include "q8_test_util.h"
#include "util/error.h"

namespace pagellm::cuda {
namespace {

using ::pagellm::test::WeightFill;
using test::HostAct;

bool k_type(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// Widths: a partial last round (160, 544: 5 and 17 blocks, rows not 4-byte
// aligned for the 18-byte blocks) and whole ones; the K types' rounds are
// their super-blocks.
std::vector<int64_t> widths(DType t) {
  if (k_type(t)) return {256, 768, 2048};
  return {160, 544, 1024};
}

TEST(CudaMmq, HostMatchesDoubleProductOfTheCodes) {
  const float kUnwritten = std::numeric_limits<float>::quiet_NaN();
  for (DType type : test::q8_types())
    for (WeightFill fill : {WeightFill::Quantized, WeightFill::RandomBytes})
      for (int64_t cols : widths(type)) {
        // 37 rows: three row groups, the last partial; 70 vectors: two
        // 64-vector blocks, partial 8-vector tiles.
        const int64_t rows = 37, n = cols == 1024 || cols == 2048 ? 70 : 33;
        SCOPED_TRACE(std::string(dtype_name(type)) + " cols " + std::to_string(cols) +
                     (fill == WeightFill::Quantized ? " quantized" : " random bytes"));
        const auto w = ::pagellm::test::make_weights(type, rows, cols, 5 + cols, fill);
        const auto x = test::random_floats(n * cols, 6 + cols);
        HostAct a(x, cols, n, cols);
        const int64_t y_stride = rows + 3;
        const auto want = test::reference(test::dequantized(w), rows, cols, a, n, y_stride);
        std::vector<float> got(want.size(), kUnwritten);
        mmq_host(type, w.bytes.data(), rows, cols, a.view, static_cast<int32_t>(n), got.data(),
                 y_stride);
        std::vector<float> g, r;
        for (int64_t v = 0; v < n; ++v)
          for (int64_t i = 0; i < y_stride; ++i) {
            const float value = got[v * y_stride + i];
            if (i >= rows) {
              ASSERT_TRUE(std::isnan(value)) << "padding of vector " << v << " written";
              continue;
            }
            g.push_back(value);
            r.push_back(want[v * y_stride + i]);
          }
        EXPECT_LE(test::rel_error(g, r), 2e-6);
      }
}

// The same integer block sums as the GEMV's, scaled and added in another
// order; add_to gets y added.
TEST(CudaMmq, HostMatchesTheGemvRenditionAndAddsTheResidual) {
  const int64_t rows = 20, cols = 4096, n = 40;
  for (DType type : test::q8_types()) {
    SCOPED_TRACE(dtype_name(type));
    const auto w = ::pagellm::test::make_weights(type, rows, cols, 11, WeightFill::Quantized);
    const auto x = test::random_floats(n * cols, 12);
    HostAct a(x, cols, n, cols);
    std::vector<float> want(rows * n), got(rows * n);
    gemv_q8_host(type, w.bytes.data(), rows, cols, a.view, n, want.data(), rows);
    const auto res = test::random_floats(rows * n, 13);
    std::vector<float> sum = res;
    mmq_host(type, w.bytes.data(), rows, cols, a.view, n, got.data(), rows, sum.data());
    EXPECT_LE(test::rel_error(got, want), 1e-6);
    for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], res[i] + got[i]) << i;
  }
}

// A vector's result is the same alone as in any batch (the header's promise;
// the engine's batches change every step).
TEST(CudaMmq, HostVectorsDoNotDependOnTheBatch) {
  const int64_t rows = 19, cols = 512, n = 70;
  for (DType type : {DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(type));
    const auto w = ::pagellm::test::make_weights(type, rows, cols, 21, WeightFill::Quantized);
    const auto x = test::random_floats(n * cols, 22);
    HostAct all(x, cols, n, cols);
    std::vector<float> together(rows * n);
    mmq_host(type, w.bytes.data(), rows, cols, all.view, n, together.data(), rows);
    for (int64_t v : {0, 7, 63, 64, 69}) {
      const std::vector<float> xv(x.begin() + v * cols, x.begin() + (v + 1) * cols);
      HostAct one(xv, cols, 1, cols);
      std::vector<float> alone(rows);
      mmq_host(type, w.bytes.data(), rows, cols, one.view, 1, alone.data(), rows);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + v * rows))
          << "vector " << v;
    }
  }
}

TEST(CudaMmq, RejectsWhatItCannotRun) {
  std::vector<float> x(512);
  HostAct a(x, 512, 1, 512);
  std::vector<uint8_t> w(dtype_row_bytes(DType::Q4_K, 512) + 2);
  float y[1];
  EXPECT_THROW(mmq_host(DType::F16, w.data(), 1, 512, a.view, 1, y, 1), ConfigError);
  EXPECT_THROW(mmq_host(DType::Q4_K, w.data(), 1, 384, a.view, 1, y, 1), ConfigError);
  EXPECT_THROW(mmq_host(DType::Q4_0, w.data(), 1, 256, a.view, 1, y, 1), ConfigError)
      << "activations of another width";
  EXPECT_THROW(mmq_host(DType::Q4_0, w.data() + 1, 1, 512, a.view, 1, y, 1), ConfigError)
      << "misaligned weights";
}

// ---- on a GPU -------------------------------------------------------------

TEST(CudaMmq, DeviceMatchesHostRenditionBitForBit) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  for (DType type : test::q8_types())
    for (int64_t cols : widths(type))
      for (int32_t n : {33, 64, 65, 130}) {
        const int64_t rows = 37;
        SCOPED_TRACE(std::string(dtype_name(type)) + " cols " + std::to_string(cols) + " x" +
                     std::to_string(n));
        const auto w =
            ::pagellm::test::make_weights(type, rows, cols, 31 + n, WeightFill::RandomBytes);
        const int64_t y_stride = rows + 3;
        const auto x = test::random_floats(n * cols, 32 + n);
        HostAct a(x, cols, n, cols);
        const auto res = test::random_floats(n * y_stride, 33 + n);
        std::vector<float> want(static_cast<size_t>(n * y_stride), 0.0f), want_sum = res;
        mmq_host(type, w.bytes.data(), rows, cols, a.view, n, want.data(), y_stride,
                 want_sum.data());

        DeviceBuffer dw = test::upload(dev, w.bytes), dx = test::upload(dev, x);
        DeviceBuffer dres = test::upload(dev, res);
        DeviceBuffer dq(dev, q8_act_bytes(n, cols)), dy(dev, want.size() * sizeof(float));
        dev.fill_zero(dy.data(), dy.bytes());
        quantize_q8_activations(dev, dx.as<float>(), cols, n, cols, dq.data());
        const GemvQ8Target t{dw.data(), rows, dy.as<float>(), y_stride, dres.as<float>()};
        mmq_multi(dev, type, cols, &t, 1, q8_act_view(dq.data(), n, cols), n);
        const auto got = test::download<float>(dev, dy, want.size());
        EXPECT_EQ(0, memcmp(got.data(), want.data(), got.size() * sizeof(float)));
        const auto sum = test::download<float>(dev, dres, res.size());
        EXPECT_EQ(0, memcmp(sum.data(), want_sum.data(), sum.size() * sizeof(float)));
      }
}

// Matrices sharing a launch get the bits of launches of their own.
TEST(CudaMmq, MultiMatrixLaunchEqualsOneLaunchEach) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  test::check_multi_matrix_launch(dev, 48, [](auto&&... args) { mmq_multi(args...); });
}

}  // namespace
}  // namespace pagellm::cuda
