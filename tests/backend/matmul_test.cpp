#include "backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/vec_dot.h"
#include "backend/kernel_test_util.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm::cpu {
namespace {

using test::dot_weight_types;
using test::make_weights;
using test::random_floats;
using test::WeightFill;

WeightMatrix view(const test::TestWeights& w) {
  return {w.type, w.n, w.rows, w.bytes.data(), w.stride};
}

int64_t inner_len(DType t) {
  return dtype_traits(t).is_quantized ? 512 : 200;
}

// Y for the rows [first, first + count) of X, computed as one batch.
std::vector<float> run(const WeightMatrix& w, const std::vector<float>& x, int64_t first,
                       int64_t count, int threads, CpuIsa isa, MatmulScratch& scratch) {
  ThreadPool pool(threads);
  const int64_t ys = w.n_out + 3;
  std::vector<float> y(count * ys, -9.0f);
  matmul(w, x.data() + first * w.n_in, w.n_in, count, y.data(), ys, pool, scratch, isa);
  std::vector<float> packed(count * w.n_out);
  for (int64_t t = 0; t < count; ++t)
    for (int64_t r = 0; r < w.n_out; ++r) packed[t * w.n_out + r] = y[t * ys + r];
  for (int64_t t = 0; t < count; ++t)
    for (int64_t r = w.n_out; r < ys; ++r) EXPECT_EQ(y[t * ys + r], -9.0f);  // untouched
  return packed;
}

// The same row of Y, bit for bit, with T = 64, 7 or 1 and 1, 2 or 3 threads,
// for every type and variant. n_out = 37 is not a multiple of any row block.
TEST(Matmul, BatchInvariance) {
  for (DType t : dot_weight_types()) {
    const int64_t n = inner_len(t), n_out = 37, T = 64;
    auto w = make_weights(t, n_out, n, 5, WeightFill::RandomBytes, 4);
    auto x = random_floats(static_cast<size_t>(T * n), 6);
    MatmulScratch scratch;
    for (CpuIsa isa : available_isas()) {
      const auto full = run(view(w), x, 0, T, 2, isa, scratch);
      auto same = [&](const std::vector<float>& part, int64_t first, const std::string& what) {
        for (size_t i = 0; i < part.size(); ++i)
          ASSERT_EQ(fp32_to_bits(part[i]), fp32_to_bits(full[first * n_out + i]))
              << dtype_name(t) << " " << isa_name(isa) << " " << what << " row "
              << first + static_cast<int64_t>(i) / n_out << " col "
              << static_cast<int64_t>(i) % n_out;
      };
      for (int threads : {1, 3}) same(run(view(w), x, 0, T, threads, isa, scratch), 0, "threads");
      same(run(view(w), x, 0, 7, 2, isa, scratch), 0, "T=7");
      same(run(view(w), x, 30, 7, 3, isa, scratch), 30, "T=7 at 30");
      for (int64_t row : {0, 1, 33, 63})
        for (int threads : {1, 2, 3})
          same(run(view(w), x, row, 1, threads, isa, scratch), row, "T=1");
    }
  }
}

// Every element of Y equals vec_dot_rows on the quantized activations, and is
// close to the double-precision product of the dequantized weights and X.
TEST(Matmul, MatchesReference) {
  ThreadPool pool(2);
  for (DType t : dot_weight_types()) {
    const int64_t n = inner_len(t), n_out = 21, T = 5;
    auto w = make_weights(t, n_out, n, 8, WeightFill::Quantized);
    auto x = random_floats(static_cast<size_t>(T * n), 9);
    MatmulScratch scratch;
    std::vector<float> y(T * n_out);
    matmul(view(w), x.data(), n, T, y.data(), n_out, pool, scratch);
    std::vector<uint8_t> xq(activation_row_bytes(t, n));
    for (int64_t tt = 0; tt < T; ++tt) {
      quantize_activation_row(t, x.data() + tt * n, xq.data(), n);
      std::vector<float> expect(n_out);
      vec_dot_rows(t, n, w.bytes.data(), w.stride, n_out, xq.data(), expect.data());
      for (int64_t r = 0; r < n_out; ++r) {
        ASSERT_EQ(fp32_to_bits(y[tt * n_out + r]), fp32_to_bits(expect[r])) << dtype_name(t);
        const auto wf = test::dequant(t, w.row(r), n);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          ref += wf[i] * x[tt * n + i];
          mag += std::fabs(wf[i] * x[tt * n + i]);
        }
        // 8-bit activations: relative error well under 1% of sum |w x|.
        ASSERT_NEAR(y[tt * n_out + r], ref, 0.01 * mag) << dtype_name(t) << " row " << r;
      }
    }
  }
}

// Several weight tiles per thread (F32 rows of 4 KiB), strided X and Y.
TEST(Matmul, ManyTilesAndStrides) {
  const int64_t n = 1024, n_out = 300, T = 9, xs = n + 5, ys = n_out + 11;
  auto w = make_weights(DType::F32, n_out, n, 1, WeightFill::Quantized);
  auto x = random_floats(static_cast<size_t>(T * xs), 2);
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> y(T * ys, 0.0f);
  matmul(view(w), x.data(), xs, T, y.data(), ys, pool, scratch);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> expect(n_out);
    vec_dot_rows(DType::F32, n, w.bytes.data(), w.stride, n_out, x.data() + t * xs, expect.data());
    for (int64_t r = 0; r < n_out; ++r)
      ASSERT_EQ(fp32_to_bits(y[t * ys + r]), fp32_to_bits(expect[r])) << t << " " << r;
  }
}

// Quantized activations reused across matrices; scratch stops growing.
TEST(Matmul, ReusesScratchAndActivations) {
  const int64_t n = 256, T = 16;
  auto w1 = make_weights(DType::Q4_K, 40, n, 1, WeightFill::Quantized);
  auto w2 = make_weights(DType::Q6_K, 24, n, 2, WeightFill::Quantized);
  auto x = random_floats(static_cast<size_t>(T * n), 3);
  ThreadPool pool(2);
  MatmulScratch scratch;
  ActivationRows a = quantize_activations(DType::Q4_K, x.data(), n, T, n, pool, scratch);
  EXPECT_EQ(a.dot_type, DType::Q8_K);
  std::vector<float> y1(T * 40), y2(T * 24), y1b(T * 40);
  matmul(view(w1), a, y1.data(), 40, pool);
  matmul(view(w2), a, y2.data(), 24, pool);  // same dot type: Q8_K
  const size_t cap = scratch.capacity();
  EXPECT_GT(cap, 0u);
  for (int i = 0; i < 3; ++i) matmul(view(w1), x.data(), n, T, y1b.data(), 40, pool, scratch);
  EXPECT_EQ(scratch.capacity(), cap);
  EXPECT_EQ(y1, y1b);

  auto w3 = make_weights(DType::Q4_0, 8, n, 4, WeightFill::Quantized);
  EXPECT_THROW(matmul(view(w3), a, y1.data(), 8, pool), Error);  // Q8_0 needed
}

// Activations normalized on the fly (RowTransform::norm) give the products of the rows
// normalized first (rms_norm), bit for bit, for every type.
TEST(Matmul, NormFusedIntoQuantizationEqualsNormFirst) {
  const int64_t T = 5;
  for (DType t : dot_weight_types()) {
    const int64_t n = inner_len(t);
    auto w = make_weights(t, 21, n, 7, WeightFill::Quantized);
    auto x = random_floats(static_cast<size_t>(T * n), 11, 3.0f);
    auto weight = random_floats(static_cast<size_t>(n), 12);
    std::vector<float> h(x.size());
    rms_norm(x.data(), weight.data(), h.data(), T, n, 1e-5f);
    ThreadPool pool(2);
    MatmulScratch s1, s2;
    std::vector<float> want(T * 21), got(T * 21);
    matmul(view(w), h.data(), n, T, want.data(), 21, pool, s1);
    const RowTransform norm = RowTransform::norm(weight.data(), 1e-5f);
    const ActivationRows a =
        quantize_activations(view(w), x.data(), n, T, pool, s2, best_isa(), &norm);
    matmul(view(w), a, got.data(), 21, pool);
    EXPECT_EQ(got, want) << dtype_name(t);
  }
}

// Row-major weights: silu(gate) * up combined on the fly
// (RowTransform::silu_mul) equals silu_mul run first, bit for bit.
TEST(Matmul, SiluMulFusedIntoQuantizationEqualsSiluMulFirst) {
  const int64_t T = 4;
  for (DType t : dot_weight_types()) {
    const int64_t n = inner_len(t);
    auto w = make_weights(t, 19, n, 8, WeightFill::Quantized);
    const auto gate = random_floats(static_cast<size_t>(T * n), 17, 4.0f);
    const auto up = random_floats(static_cast<size_t>(T * n), 18);
    std::vector<float> h = gate;
    silu_mul(h.data(), up.data(), T * n);
    ThreadPool pool(2);
    MatmulScratch s1, s2;
    std::vector<float> want(T * 19), got(T * 19);
    matmul(view(w), h.data(), n, T, want.data(), 19, pool, s1);
    const RowTransform tr = RowTransform::silu_mul(up.data(), n);
    const ActivationRows a =
        quantize_activations(view(w), gate.data(), n, T, pool, s2, best_isa(), &tr);
    matmul(view(w), a, got.data(), 19, pool);
    EXPECT_EQ(got, want) << dtype_name(t);
  }
}

TEST(Matmul, RejectsLengthMismatch) {
  auto w = make_weights(DType::Q8_0, 4, 64, 1, WeightFill::Quantized);
  auto x = random_floats(96, 2);
  ThreadPool pool(1);
  MatmulScratch scratch;
  ActivationRows a = quantize_activations(DType::Q8_0, x.data(), 96, 1, 96, pool, scratch);
  std::vector<float> y(4);
  EXPECT_THROW(matmul(view(w), a, y.data(), 4, pool), Error);
}

}  // namespace
}  // namespace pagellm::cpu
