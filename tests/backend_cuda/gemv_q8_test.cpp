// The int8 decode GEMV (gemv_q8.h) and its activations (q8_activations.h):
// their host renditions against the CPU's Q8_0 activation bytes, the CPU's
// dot products and a double-precision product, over realistic and random-byte
// weights; on a GPU, the kernels against their host renditions bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/vec_dot.h"
#include "backend/cuda/gemv_q8.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/q8_activations.h"
#include "cuda_test_util.h"
#include "q8_test_util.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm::cuda {
namespace {

using ::pagellm::test::WeightFill;
using test::dequantized;
using test::HostAct;
using test::q8_types;
using test::reference;

TEST(CudaQ8Activations, HostBytesAreTheCpuQ8_0Blocks) {
  const int64_t cols = 256, n = 3;
  auto x = test::random_floats(n * cols, 5);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // a block of zeros
  x[100] = 1e4f;                                    // one large value
  x[2 * cols + 7] = -3e-3f;
  HostAct a(x, cols, n, cols);
  for (int64_t v = 0; v < n; ++v) {
    std::vector<BlockQ8_0> cpu(cols / 32);
    cpu::quantize_activation_row(DType::Q4_0, x.data() + v * cols, cpu.data(), cols,
                                 cpu::CpuIsa::Scalar);
    for (int64_t b = 0; b < cols / 32; ++b) {
      SCOPED_TRACE("vector " + std::to_string(v) + " block " + std::to_string(b));
      EXPECT_EQ(a.view.d[v * 8 + b], fp16_to_fp32(cpu[b].d));
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(a.view.qs[v * cols + 32 * b + i], cpu[b].qs[i]);
        sum += cpu[b].qs[i];
      }
      EXPECT_EQ(a.view.sum[v * 8 + b], sum);
    }
  }
}

TEST(CudaQ8Activations, RejectsRowsOfPartBlocks) {
  std::vector<float> x(48);
  alignas(16) uint8_t buf[256];
  EXPECT_THROW(quantize_q8_activations_host(x.data(), 48, 1, 48, buf), ConfigError);
}

// Widths give groups of 1, 2 and 4 warps per row for both unit sizes.
const int64_t kWidths[] = {512, 2560, 4352, 8192};

TEST(CudaGemvQ8, HostMatchesDoubleProductOfTheCodes) {
  for (DType type : q8_types())
    for (WeightFill fill : {WeightFill::Quantized, WeightFill::RandomBytes})
      for (int64_t cols : kWidths) {
        const int64_t rows = 3, n = cols == 512 ? 18 : 2;  // 18: two passes
        SCOPED_TRACE(std::string(dtype_name(type)) + " cols " + std::to_string(cols) +
                     (fill == WeightFill::Quantized ? " quantized" : " random bytes"));
        const auto w = ::pagellm::test::make_weights(type, rows, cols, 7 + cols, fill);
        const auto x = test::random_floats(n * cols, 9 + cols);
        HostAct a(x, cols, n, cols);
        const int64_t y_stride = rows + 2;
        const auto want = reference(dequantized(w), rows, cols, a, n, y_stride);
        std::vector<float> got(want.size(), 0.0f);
        gemv_q8_host(type, w.bytes.data(), rows, cols, a.view, n, got.data(), y_stride);
        EXPECT_LE(test::rel_error(got, want), 2e-6);
      }
}

// The types whose CPU activations are Q8_0 blocks see the same codes and
// scales, so only the order of the float sums differs from the CPU's dot
// products. (Q4_1 / Q5_1 take Q8_1 on the CPU, whose block sum is rounded to
// f16; the K types Q8_K.)
TEST(CudaGemvQ8, HostMatchesTheCpuDotProducts) {
  const int64_t rows = 5, cols = 2560;
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::IQ4_NL}) {
    SCOPED_TRACE(dtype_name(type));
    const auto w = ::pagellm::test::make_weights(type, rows, cols, 21, WeightFill::Quantized);
    const auto x = test::random_floats(cols, 22);
    std::vector<uint8_t> act(cpu::activation_row_bytes(type, cols));
    cpu::quantize_activation_row(type, x.data(), act.data(), cols, cpu::CpuIsa::Scalar);
    std::vector<float> want(rows), got(rows);
    cpu::vec_dot_rows(type, cols, w.bytes.data(), w.stride, rows, act.data(), want.data(),
                      cpu::CpuIsa::Scalar);
    HostAct a(x, cols, 1, cols);
    gemv_q8_host(type, w.bytes.data(), rows, cols, a.view, 1, got.data(), rows);
    EXPECT_LE(test::rel_error(got, want), 2e-6);
  }
}

TEST(CudaGemvQ8, RejectsWhatItCannotRun) {
  std::vector<float> x(512);
  HostAct a(x, 512, 1, 512);
  std::vector<uint8_t> w(dtype_row_bytes(DType::Q4_K, 512) + 2);
  float y[1];
  EXPECT_THROW(gemv_q8_host(DType::F16, w.data(), 1, 256, a.view, 1, y, 1), ConfigError);
  EXPECT_THROW(gemv_q8_host(DType::Q4_K, w.data(), 1, 384, a.view, 1, y, 1), ConfigError);
  EXPECT_THROW(gemv_q8_host(DType::Q4_0, w.data(), 1, 256, a.view, 1, y, 1), ConfigError)
      << "activations of another width";
  EXPECT_THROW(gemv_q8_host(DType::Q4_0, w.data() + 1, 1, 512, a.view, 1, y, 1), ConfigError)
      << "misaligned weights";
  EXPECT_FALSE(gemv_q8_supports(DType::Q2_K));
  EXPECT_TRUE(gemv_q8_supports(DType::Q6_K));
}

// The fused RMSNorm quantizer's host rendition is the norm's rendition, then
// the quantizer: against the CPU's norm, then the CPU's Q8_0 activations.
TEST(CudaQ8Activations, NormedHostCodesAreTheCpuCodesOfTheNorm) {
  const int64_t n = 3, cols = 4096;
  const auto x = test::random_floats(n * cols, 41, 2.0f), w = test::random_floats(cols, 42);
  std::vector<uint64_t> buf(q8_act_bytes(n, cols) / 8 + 2);
  auto* base = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(buf.data()) + 15) & ~15ul);
  rms_norm_q8_activations_host(x.data(), w.data(), n, cols, 1e-5f, base);
  const Q8ActView a = q8_act_view(base, n, cols);
  std::vector<float> normed(x.size());
  pagellm::rms_norm(x.data(), w.data(), normed.data(), n, cols, 1e-5f);
  int differ = 0;
  for (int64_t v = 0; v < n; ++v) {
    std::vector<BlockQ8_0> cpu(cols / 32);
    cpu::quantize_activation_row(DType::Q8_0, normed.data() + v * cols, cpu.data(), cols,
                                 cpu::CpuIsa::Scalar);
    for (int64_t c = 0; c < cols; ++c) {
      const int q = cpu[c / 32].qs[c % 32], got = a.qs[v * cols + c];
      ASSERT_LE(std::abs(q - got), 1) << "vector " << v << " element " << c;
      differ += q != got;
    }
  }
  // The norms' float rows may differ in the last bit (their sums run in other
  // orders), which moves a code only at a rounding boundary.
  EXPECT_LE(differ, 8);
}

// ---- on a GPU -------------------------------------------------------------

// The fused producers give the bytes of their two-kernel paths (rms_norm or
// silu_mul, then quantize_q8_activations); the norm's also its rendition's.
TEST(CudaQ8Activations, FusedKernelsEqualTheirTwoKernelPaths) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  for (int64_t cols : {64, 2048, 5632}) {
    SCOPED_TRACE(cols);
    const int64_t n = 5;
    const auto x = test::random_floats(n * cols, 51, 2.0f), w = test::random_floats(cols, 52);
    const auto up = test::random_floats(n * cols, 53);
    const size_t bytes = q8_act_bytes(n, cols);
    DeviceBuffer dx = test::upload(dev, x), dw = test::upload(dev, w), du = test::upload(dev, up);
    DeviceBuffer tmp(dev, x.size() * 4), fused(dev, bytes), twice(dev, bytes);

    rms_norm_q8_activations(dev, dx.as<float>(), dw.as<float>(), n, cols, 1e-5f, fused.data());
    rms_norm(dev, dx.as<float>(), dw.as<float>(), tmp.as<float>(), n, cols, 1e-5f);
    quantize_q8_activations(dev, tmp.as<float>(), cols, n, cols, twice.data());
    const auto a = test::download<uint8_t>(dev, fused, bytes);
    EXPECT_EQ(a, test::download<uint8_t>(dev, twice, bytes)) << "rms_norm";
    std::vector<uint64_t> hb(bytes / 8 + 2);
    auto* base = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(hb.data()) + 15) & ~15ul);
    rms_norm_q8_activations_host(x.data(), w.data(), n, cols, 1e-5f, base);
    EXPECT_EQ(0, memcmp(a.data(), base, bytes)) << "rms_norm host rendition";

    silu_mul_q8_activations(dev, dx.as<float>(), du.as<float>(), n, cols, fused.data());
    DeviceBuffer g = test::upload(dev, x);
    silu_mul(dev, g.as<float>(), du.as<float>(), n * cols);
    quantize_q8_activations(dev, g.as<float>(), cols, n, cols, twice.data());
    EXPECT_EQ(test::download<uint8_t>(dev, fused, bytes),
              test::download<uint8_t>(dev, twice, bytes))
        << "silu_mul";
    EXPECT_EQ(test::download<float>(dev, dx, x.size()), x) << "gate is not written";
  }
}

TEST(CudaGemvQ8, DeviceMatchesHostRenditionBitForBit) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  for (DType type : q8_types())
    for (int64_t cols : kWidths)
      for (int32_t n : {1, 3, 16, 17, 32}) {
        const int64_t rows = 37;
        SCOPED_TRACE(std::string(dtype_name(type)) + " cols " + std::to_string(cols) + " x" +
                     std::to_string(n));
        const auto w =
            ::pagellm::test::make_weights(type, rows, cols, 31 + n, WeightFill::RandomBytes);
        const int64_t x_stride = cols + 4, y_stride = rows + 3;
        const auto x = test::random_floats(n * x_stride, 32 + n);
        HostAct a(x, x_stride, n, cols);
        std::vector<float> want(static_cast<size_t>(n * y_stride), 0.0f);
        gemv_q8_host(type, w.bytes.data(), rows, cols, a.view, n, want.data(), y_stride);

        DeviceBuffer dw = test::upload(dev, w.bytes), dx = test::upload(dev, x);
        DeviceBuffer dq(dev, q8_act_bytes(n, cols)), dy(dev, want.size() * sizeof(float));
        dev.fill_zero(dy.data(), dy.bytes());
        quantize_q8_activations(dev, dx.as<float>(), x_stride, n, cols, dq.data());
        const auto q_dev = test::download<uint8_t>(dev, dq, q8_act_bytes(n, cols));
        ASSERT_EQ(0, memcmp(q_dev.data(), a.view.qs, q_dev.size())) << "activation bytes";
        gemv_q8(dev, type, dw.data(), rows, cols, q8_act_view(dq.data(), n, cols), n,
                dy.as<float>(), y_stride);
        const auto got = test::download<float>(dev, dy, want.size());
        EXPECT_EQ(0, memcmp(got.data(), want.data(), got.size() * sizeof(float)));
      }
}

// Matrices sharing a launch (gemv_q8_multi) get the bits of launches of their own.
TEST(CudaGemvQ8, MultiMatrixLaunchEqualsOneLaunchEach) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  test::check_multi_matrix_launch(dev, 3, [](auto&&... args) { gemv_q8_multi(args...); });
}

TEST(CudaGemvQ8, DeviceVectorsDoNotDependOnTheBatch) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t rows = 129, cols = 4096, n = 32;
  for (DType type : q8_types()) {
    SCOPED_TRACE(dtype_name(type));
    const auto w = ::pagellm::test::make_weights(type, rows, cols, 61, WeightFill::Quantized);
    const auto x = test::random_floats(n * cols, 62);
    DeviceBuffer dw = test::upload(dev, w.bytes), dx = test::upload(dev, x);
    DeviceBuffer dq(dev, q8_act_bytes(n, cols)), d1(dev, q8_act_bytes(1, cols));
    DeviceBuffer all(dev, n * rows * sizeof(float)), one(dev, rows * sizeof(float));
    quantize_q8_activations(dev, dx.as<float>(), cols, n, cols, dq.data());
    gemv_q8(dev, type, dw.data(), rows, cols, q8_act_view(dq.data(), n, cols), n, all.as<float>(),
            rows);
    const auto together = test::download<float>(dev, all, n * rows);
    for (int64_t v : {0, 15, 16, 31}) {
      quantize_q8_activations(dev, dx.as<float>() + v * cols, cols, 1, cols, d1.data());
      gemv_q8(dev, type, dw.data(), rows, cols, q8_act_view(d1.data(), 1, cols), 1, one.as<float>(),
              rows);
      const auto alone = test::download<float>(dev, one, rows);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + v * rows))
          << "vector " << v;
    }
  }
}

}  // namespace
}  // namespace pagellm::cuda
