// CUDA element-wise kernels against the CPU kernels (backend/cpu/ops.h) and
// dequantize_row, on fresh random inputs.
#include "backend/cuda/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "backend/cpu/ops.h"
#include "cuda_test_util.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {
namespace {

using test::download;
using test::rel_error;
using test::upload;

TEST(CudaOps, EmbeddingGatherEveryType) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t vocab = 50, embd = 512;
  const std::vector<int32_t> tokens = {3, 0, 49, 3, 17, -1, 50};
  for (DType type : test::cuda_weight_types()) {
    SCOPED_TRACE(dtype_name(type));
    const test::HostWeights w = test::make_weights(type, vocab, embd, 11);
    DeviceBuffer table = upload(dev, w.bytes), ids = upload(dev, tokens);
    DeviceBuffer out(dev, tokens.size() * embd * sizeof(float));
    embedding_gather(dev, type, table.data(), vocab, embd, ids.as<int32_t>(),
                     static_cast<int64_t>(tokens.size()), out.as<float>());
    const auto got = download<float>(dev, out, tokens.size() * embd);
    std::vector<float> want(got.size(), 0.0f);
    for (size_t t = 0; t < tokens.size(); ++t)
      if (tokens[t] >= 0 && tokens[t] < vocab)
        std::copy_n(w.values.begin() + tokens[t] * embd, embd, want.begin() + t * embd);
    EXPECT_LE(rel_error(got, want), 1e-6);
  }
}

TEST(CudaOps, RmsNormMatchesCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t rows = 7, n = 4096;
  const auto x = test::random_floats(rows * n, 1, 3.0f), w = test::random_floats(n, 2);
  std::vector<float> want(x.size());
  pagellm::rms_norm(x.data(), w.data(), want.data(), rows, n, 1e-5f);
  DeviceBuffer dx = upload(dev, x), dw = upload(dev, w), dout(dev, x.size() * 4);
  rms_norm(dev, dx.as<float>(), dw.as<float>(), dout.as<float>(), rows, n, 1e-5f);
  EXPECT_LE(rel_error(download<float>(dev, dout, x.size()), want), 1e-6);
  std::vector<float> host(x.size());
  rms_norm_host(x.data(), w.data(), host.data(), rows, n, 1e-5f);
  EXPECT_EQ(download<float>(dev, dout, x.size()), host) << "the host rendition's bits";
  rms_norm(dev, dx.as<float>(), dw.as<float>(), dx.as<float>(), rows, n, 1e-5f);  // in place
  EXPECT_LE(rel_error(download<float>(dev, dx, x.size()), want), 1e-6);
}

// Unweighted (Gemma 4's v norm, a null weight): the host rendition's bits.
TEST(CudaOps, UnweightedRmsNormMatchesCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t rows = 9, n = 256;
  const auto x = test::random_floats(rows * n, 4, 3.0f);
  std::vector<float> want(x.size()), host(x.size());
  pagellm::rms_norm(x.data(), nullptr, want.data(), rows, n, 1e-6f);
  rms_norm_host(x.data(), nullptr, host.data(), rows, n, 1e-6f);
  DeviceBuffer dx = upload(dev, x);
  rms_norm(dev, dx.as<float>(), nullptr, dx.as<float>(), rows, n, 1e-6f);
  const auto got = download<float>(dev, dx, x.size());
  EXPECT_LE(rel_error(got, want), 1e-6);
  EXPECT_EQ(got, host) << "the host rendition's bits";
}

// The kernel's block reduction (strided double sums, shuffles, warps in
// order) on the host against the CPU's RMSNorm; rows shorter than the block
// leave threads without elements.
TEST(CudaOps, RmsNormHostRenditionMatchesCpu) {
  for (int64_t n : {64, 576, 4096, 5120}) {
    const int64_t rows = 3;
    const auto x = test::random_floats(rows * n, 1 + n, 3.0f), w = test::random_floats(n, 2);
    std::vector<float> want(x.size()), got(x.size());
    pagellm::rms_norm(x.data(), w.data(), want.data(), rows, n, 1e-5f);
    rms_norm_host(x.data(), w.data(), got.data(), rows, n, 1e-5f);
    EXPECT_LE(rel_error(got, want), 1e-6) << n;
  }
  // Unweighted (Gemma 4's v norm): the CPU's bits.
  for (int64_t n : {32, 64, 256}) {
    const int64_t rows = 5;
    const auto x = test::random_floats(rows * n, 3 + n, 3.0f);
    std::vector<float> want(x.size()), got(x.size());
    pagellm::rms_norm(x.data(), nullptr, want.data(), rows, n, 1e-6f);
    rms_norm_host(x.data(), nullptr, got.data(), rows, n, 1e-6f);
    EXPECT_EQ(got, want) << "unweighted, " << n;
  }
  // A row of zeros: the scale is 1 / sqrt(eps).
  std::vector<float> zero(256, 0.0f);
  EXPECT_FLOAT_EQ(rms_scale_host(zero.data(), 256, 1e-6f), 1000.0f);
}

TEST(CudaOps, RopeBothStylesMatchCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int32_t head_dim = 128, n_heads = 6, n_rot = 96;
  const std::vector<int32_t> pos = {0, 1, 5, 300, 4095, 32767};
  const int64_t T = static_cast<int64_t>(pos.size()), stride = n_heads * head_dim + 64;
  for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
    const auto x = test::random_floats(T * stride, 5 + static_cast<int>(style));
    std::vector<float> want = x;
    RopeCache cpu(n_rot, 10000.0f, 0.5f);
    cpu.prepare(pos.data(), T);
    cpu.apply(want.data(), T, stride, n_heads, head_dim, style);
    DeviceBuffer dx = upload(dev, x), dpos = upload(dev, pos);
    CudaRopeCache gpu(n_rot, 10000.0f, 0.5f);
    gpu.prepare(dev, dpos.as<int32_t>(), T);
    gpu.apply(dev, dx.as<float>(), T, stride, n_heads, head_dim, style);
    EXPECT_LE(rel_error(download<float>(dev, dx, x.size()), want), 1e-6)
        << (style == RopeStyle::kNorm ? "norm" : "neox");
  }
}

// The kernels' per-pair code (angle table, both pair orders, the rounding of
// the rotation) on the host against the CPU's RoPE.
TEST(CudaOps, RopeHostRenditionMatchesCpu) {
  const int32_t head_dim = 128, n_heads = 6, n_rot = 96;
  const std::vector<int32_t> pos = {0, 1, 5, 300, 4095, 32767};
  const int64_t T = static_cast<int64_t>(pos.size()), stride = n_heads * head_dim + 64;
  for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
    const auto x = test::random_floats(T * stride, 5 + static_cast<int>(style));
    std::vector<float> want = x, got = x;
    RopeCache cpu(n_rot, 10000.0f, 0.5f);
    cpu.prepare(pos.data(), T);
    cpu.apply(want.data(), T, stride, n_heads, head_dim, style);
    rope_host(got.data(), pos.data(), T, stride, n_heads, head_dim, n_rot, 10000.0f, 0.5f, style);
    EXPECT_LE(rel_error(got, want), 1e-6) << (style == RopeStyle::kNorm ? "norm" : "neox");
    EXPECT_EQ(got[n_rot + 1], x[n_rot + 1]);  // dims past n_rot stay
  }
}

// Llama 3.1 / LongRoPE frequency factors and an attention factor.
std::vector<float> rope_factors(int32_t n_rot) {
  std::vector<float> f(static_cast<size_t>(n_rot / 2));
  for (size_t i = 0; i < f.size(); ++i) f[i] = 1.0f + 0.25f * static_cast<float>(i % 7);
  return f;
}

TEST(CudaOps, RopeFactorsMatchCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int32_t head_dim = 64, n_heads = 4, n_rot = 64;
  const std::vector<int32_t> pos = {0, 3, 900, 20000};
  const int64_t T = static_cast<int64_t>(pos.size()), stride = n_heads * head_dim;
  const auto factors = rope_factors(n_rot);
  const auto x = test::random_floats(T * stride, 11);
  std::vector<float> want = x;
  RopeCache cpu(n_rot, 500000.0f, 1.0f, factors.data(), 1.19f);
  cpu.prepare(pos.data(), T);
  cpu.apply(want.data(), T, stride, n_heads, head_dim, RopeStyle::kNeox);
  DeviceBuffer dx = upload(dev, x), dpos = upload(dev, pos);
  CudaRopeCache gpu(n_rot, 500000.0f, 1.0f, factors.data(), 1.19f);
  gpu.prepare(dev, dpos.as<int32_t>(), T);
  gpu.apply(dev, dx.as<float>(), T, stride, n_heads, head_dim, RopeStyle::kNeox);
  EXPECT_LE(rel_error(download<float>(dev, dx, x.size()), want), 1e-6);
}

TEST(CudaOps, RopeFactorsHostRenditionMatchesCpu) {
  const int32_t head_dim = 64, n_heads = 4, n_rot = 64;
  const std::vector<int32_t> pos = {0, 3, 900, 20000};
  const int64_t T = static_cast<int64_t>(pos.size()), stride = n_heads * head_dim;
  const auto factors = rope_factors(n_rot);
  for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
    const auto x = test::random_floats(T * stride, 12);
    std::vector<float> want = x, got = x, plain = x;
    RopeCache cpu(n_rot, 500000.0f, 1.0f, factors.data(), 1.19f);
    cpu.prepare(pos.data(), T);
    cpu.apply(want.data(), T, stride, n_heads, head_dim, style);
    rope_host(got.data(), pos.data(), T, stride, n_heads, head_dim, n_rot, 500000.0f, 1.0f, style,
              factors.data(), 1.19f);
    EXPECT_EQ(got, want);
    rope_host(plain.data(), pos.data(), T, stride, n_heads, head_dim, n_rot, 500000.0f, 1.0f,
              style);
    EXPECT_GT(rel_error(plain, want), 1e-3);  // the factors change the rotation
  }
}

TEST(CudaOps, GeluTanhMulMatchesCpu) {
  const int64_t n = 4099;
  auto gate = test::random_floats(n, 21), up = test::random_floats(n, 22);
  for (int64_t i = 0; i < n; ++i) gate[static_cast<size_t>(i)] *= 6.0f;  // the tails too
  std::vector<float> want = gate, host = gate;
  pagellm::glu(Activation::kGeluTanh, want.data(), up.data(), n);
  gelu_tanh_mul_host(host.data(), up.data(), n);
  EXPECT_EQ(host, want) << "host rendition";
  if (cuda_device_count() == 0) return;  // the device half needs a GPU
  CudaDevice dev(0);
  DeviceBuffer dg = upload(dev, gate), du = upload(dev, up);
  gelu_tanh_mul(dev, dg.as<float>(), du.as<const float>(), n);
  EXPECT_LE(rel_error(download<float>(dev, dg, gate.size()), want), 1e-6);
}

TEST(CudaOps, SigmoidMulMatchesCpu) {
  const int64_t n = 4099;
  auto gate = test::random_floats(n, 23), up = test::random_floats(n, 24);
  for (int64_t i = 0; i < n; ++i) gate[static_cast<size_t>(i)] *= 30.0f;  // saturated tails too
  gate[0] = -120.0f, gate[1] = 95.0f, gate[2] = 0.0f;
  std::vector<float> want = gate, host = gate;
  pagellm::glu(Activation::kSigmoid, want.data(), up.data(), n);
  sigmoid_mul_host(host.data(), up.data(), n);
  EXPECT_EQ(host, want) << "host rendition";
  if (cuda_device_count() == 0) return;  // the device half needs a GPU
  CudaDevice dev(0);
  DeviceBuffer dg = upload(dev, gate), du = upload(dev, up);
  sigmoid_mul(dev, dg.as<float>(), du.as<const float>(), n);
  EXPECT_LE(rel_error(download<float>(dev, dg, gate.size()), want), 1e-6);
}

// gpt-oss's clamped SwiGLU: gates and ups spread over both clamps (|x| up
// to 30 against the limit 7), the exact limits and a NaN gate.
std::pair<std::vector<float>, std::vector<float>> clamped_swiglu_inputs(int64_t n) {
  auto gate = test::random_floats(n, 25), up = test::random_floats(n, 26);
  for (int64_t i = 0; i < n; ++i) {
    gate[static_cast<size_t>(i)] *= 30.0f;
    up[static_cast<size_t>(i)] *= 30.0f;
  }
  gate[0] = 7.0f, up[0] = -7.0f;
  gate[1] = -120.0f, up[1] = 7.0f;
  gate[2] = 0.0f, up[2] = -1.0f;
  gate[3] = std::nanf("");
  return {gate, up};
}

TEST(CudaOps, ClampedSwigluHostRenditionMatchesCpu) {
  const int64_t n = 4099;
  const auto [gate, up] = clamped_swiglu_inputs(n);
  std::vector<float> want = gate, host = gate;
  pagellm::glu(Activation::kSwigluClamped, want.data(), up.data(), n);
  swiglu_clamped_mul_host(host.data(), up.data(), n);
  ASSERT_TRUE(std::isnan(want[3]) && std::isnan(host[3]));
  want[3] = host[3] = 0.0f;  // NaN != NaN
  EXPECT_EQ(host, want);
}

TEST(CudaOps, ClampedSwigluMatchesCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  const int64_t n = 4099;
  const auto [gate, up] = clamped_swiglu_inputs(n);
  std::vector<float> want = gate;
  pagellm::glu(Activation::kSwigluClamped, want.data(), up.data(), n);
  CudaDevice dev(0);
  DeviceBuffer dg = upload(dev, gate), du = upload(dev, up);
  swiglu_clamped_mul(dev, dg.as<float>(), du.as<const float>(), n);
  auto got = download<float>(dev, dg, gate.size());
  EXPECT_TRUE(std::isnan(got[3]));
  got[3] = want[3] = 0.0f;
  EXPECT_LE(rel_error(got, want), 1e-6);
}

TEST(CudaOps, SiluMulAddBiasAndResidualMatchCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const int64_t n = 10007;
  auto g = test::random_floats(n, 7, 4.0f);
  const auto u = test::random_floats(n, 8);
  g[0] = -120.0f, g[1] = 95.0f;
  std::vector<float> want = g;
  pagellm::silu_mul(want.data(), u.data(), n);
  DeviceBuffer dg = upload(dev, g), du = upload(dev, u);
  silu_mul(dev, dg.as<float>(), du.as<float>(), n);
  EXPECT_LE(rel_error(download<float>(dev, dg, n), want), 1e-6);

  std::vector<float> x = test::random_floats(n, 9), sum = x;
  pagellm::add_inplace(sum.data(), u.data(), n);
  DeviceBuffer dx = upload(dev, x);
  add_inplace(dev, dx.as<float>(), du.as<float>(), n);
  EXPECT_EQ(download<float>(dev, dx, n), sum);  // one rounding either way: identical

  const int64_t rows = 5, cols = 300, stride = 320;
  auto y = test::random_floats(rows * stride, 10);
  const auto bias = test::random_floats(cols, 11);
  std::vector<float> yb = y;
  pagellm::add_bias(yb.data(), bias.data(), rows, cols, stride);
  DeviceBuffer dy = upload(dev, y), db = upload(dev, bias);
  add_bias(dev, dy.as<float>(), db.as<float>(), rows, cols, stride);
  EXPECT_EQ(download<float>(dev, dy, y.size()), yb);
}

}  // namespace
}  // namespace pagellm::cuda
