// The CPU backend's fused paths against its own unfused ops: products with
// bias and residual epilogues, and silu_mul fused into the down projection's
// input, give the same bits as running the ops one after another.
#include "backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/kernel_test_util.h"
#include "util/error.h"

namespace pagellm::cpu {
namespace {

using test::make_weights;
using test::pack;
using test::Packed;
using test::random_floats;
using test::WeightFill;

// A weight matrix in either layout, owning its bytes.
struct Matrix {
  test::TestWeights rows;
  Packed packed;
  bool use_packed;
  WeightMatrix view() const {
    return use_packed ? packed.view()
                      : WeightMatrix{rows.type, rows.n, rows.rows, rows.bytes.data(), rows.stride};
  }
};

Matrix make_matrix(DType t, int64_t n_out, int64_t n_in, uint64_t seed, bool packed) {
  Matrix m{make_weights(t, n_out, n_in, seed, WeightFill::Quantized), {t, 0, 0}, packed};
  if (packed) m.packed = pack(m.rows);
  return m;
}

struct Step {
  std::vector<int32_t> positions, seqs;
  StepInputs in;
  explicit Step(int32_t n_tokens) {
    for (int32_t t = 0; t < n_tokens; ++t) {
      positions.push_back(3 + 5 * t);
      seqs.push_back(0);
    }
    in.n_tokens = n_tokens;
    in.n_seqs = 1;
    in.positions = positions.data();
    in.token_seq = seqs.data();
  }
};

// q and v (bias) and k (none) from norm_matmul with bias epilogues equal
// norm_matmul, then add_bias, bit for bit: packed and row-major weights, float
// weights (the default path), outputs whose rows fall on 16-row groups and ones
// that do not, in either order, 1-3 threads.
TEST(CpuBackend, BiasEpilogueEqualsAddBiasAfterTheProduct) {
  const int64_t n = 256;
  const struct {
    int64_t q, k, v;
    bool v_first;
  } shapes[] = {
      {384, 128, 128, false}, {640, 160, 160, false}, {256, 128, 48, true}, {96, 48, 24, false}};
  const struct {
    DType type;
    bool packed;
  } kinds[] = {{DType::Q4_0, true}, {DType::Q4_K, true}, {DType::Q6_K, false}, {DType::F16, true}};
  for (const auto& s : shapes) {
    for (const auto& kind : kinds) {
      const Matrix wq = make_matrix(kind.type, s.q, n, 1, kind.packed);
      const Matrix wk = make_matrix(kind.type, s.k, n, 2, kind.packed);
      const Matrix wv = make_matrix(kind.type, s.v, n, 3, kind.packed);
      const WeightMatrix q_w = wq.view(), k_w = wk.view(), v_w = wv.view();
      const auto bq = random_floats(static_cast<size_t>(s.q), 4);
      const auto bv = random_floats(static_cast<size_t>(s.v), 5);
      const auto norm = random_floats(static_cast<size_t>(n), 6);
      for (int threads : {1, 2, 3}) {
        for (int32_t T : {1, 7}) {
          ThreadPool pool(threads);
          CpuBackend b(&pool);
          Step step(T);
          b.begin_step(step.in, RopeParams{16, 10000.0f, 1.0f});
          const auto x = random_floats(static_cast<size_t>(T * n), 7 + T, 2.0f);
          std::vector<float> h(x.size());
          std::vector<float> q(T * s.q), k(T * s.k), v(T * s.v);
          std::vector<float> q2 = q, k2 = k, v2 = v;
          std::vector<MatmulOutput> fused = {
              {&q_w, q.data(), bq.data()}, {&k_w, k.data()}, {&v_w, v.data(), bv.data()}};
          std::vector<MatmulOutput> plain = {
              {&q_w, q2.data()}, {&k_w, k2.data()}, {&v_w, v2.data()}};
          if (s.v_first) {
            std::rotate(fused.begin(), fused.begin() + 2, fused.end());
            std::rotate(plain.begin(), plain.begin() + 2, plain.end());
          }
          b.norm_matmul(x.data(), norm.data(), 1e-5f, h.data(), T, fused.data(), fused.size());
          b.norm_matmul(x.data(), norm.data(), 1e-5f, h.data(), T, plain.data(), plain.size());
          b.add_bias(q2.data(), bq.data(), T, s.q, s.q);
          b.add_bias(v2.data(), bv.data(), T, s.v, s.v);
          const std::string at = std::string(dtype_name(kind.type)) + " q rows " +
                                 std::to_string(s.q) + " threads " + std::to_string(threads) +
                                 " T " + std::to_string(T);
          EXPECT_EQ(q, q2) << at;
          EXPECT_EQ(k, k2) << at;
          EXPECT_EQ(v, v2) << at;
        }
      }
    }
  }
}

// silu_mul_matmul equals silu_mul then matmul, bit for bit, and leaves gate
// as it was where it fuses (quantized weights).
TEST(CpuBackend, SiluMulMatmulEqualsSiluMulThenMatmul) {
  const int64_t F = 512, E = 96;
  for (DType t : {DType::Q4_0, DType::Q5_K, DType::Q8_0, DType::F16}) {
    for (bool packed : {true, false}) {
      const Matrix wd = make_matrix(t, E, F, 9, packed);
      const WeightMatrix w = wd.view();
      for (int32_t T : {1, 6}) {
        ThreadPool pool(2);
        CpuBackend b(&pool);
        Step step(T);
        b.begin_step(step.in, RopeParams{64, 10000.0f, 1.0f});
        const auto gate = random_floats(static_cast<size_t>(T * F), 10, 3.0f);
        const auto up = random_floats(static_cast<size_t>(T * F), 11);
        std::vector<float> g1 = gate, g2 = gate, y1(T * E), y2(T * E);
        b.silu_mul_matmul(g1.data(), up.data(), T, {{&w, y1.data()}});
        b.silu_mul(g2.data(), up.data(), T * F);
        b.matmul(g2.data(), T, {{&w, y2.data()}});
        EXPECT_EQ(y1, y2) << dtype_name(t) << " packed " << packed << " T " << T;
        if (dot_type(t) != DType::F32) {
          EXPECT_EQ(g1, gate) << dtype_name(t);
        }
      }
    }
  }
}

// The residual epilogue (add_to += y) equals add_inplace after the product,
// bit for bit, alone and after a bias: packed and row-major weights, float
// weights, 1-3 threads, matmul and silu_mul_matmul.
TEST(CpuBackend, ResidualEpilogueEqualsAddAfterTheProduct) {
  const int64_t n = 256, E = 96;
  for (DType t : {DType::Q4_0, DType::Q6_K, DType::F16}) {
    for (bool packed : {true, false}) {
      const Matrix wm = make_matrix(t, E, n, 21, packed);
      const WeightMatrix w = wm.view();
      const auto bias = random_floats(static_cast<size_t>(E), 22);
      for (int threads : {1, 3}) {
        for (int32_t T : {1, 5}) {
          ThreadPool pool(threads);
          CpuBackend b(&pool);
          Step step(T);
          b.begin_step(step.in, RopeParams{64, 10000.0f, 1.0f});
          const auto x = random_floats(static_cast<size_t>(T * n), 23, 2.0f);
          const auto up = random_floats(static_cast<size_t>(T * n), 24);
          const auto res = random_floats(static_cast<size_t>(T * E), 25);
          for (const float* bp : {static_cast<const float*>(nullptr), bias.data()}) {
            std::vector<float> y1(T * E), y2(T * E), r1 = res, r2 = res;
            b.matmul(x.data(), T, {{.w = &w, .y = y1.data(), .bias = bp, .add_to = r1.data()}});
            b.matmul(x.data(), T, {{.w = &w, .y = y2.data(), .bias = bp}});
            b.add_inplace(r2.data(), y2.data(), T * E);
            const std::string at = std::string(dtype_name(t)) + " packed " +
                                   std::to_string(packed) + " threads " + std::to_string(threads) +
                                   " T " + std::to_string(T) + (bp ? " bias" : "");
            EXPECT_EQ(y1, y2) << at;
            EXPECT_EQ(r1, r2) << at;
            EXPECT_NE(r1, res) << at;
          }
          std::vector<float> g1 = x, g2 = x, y1(T * E), y2(T * E), r1 = res, r2 = res;
          b.silu_mul_matmul(g1.data(), up.data(), T,
                            {{.w = &w, .y = y1.data(), .add_to = r1.data()}});
          b.silu_mul(g2.data(), up.data(), T * n);
          b.matmul(g2.data(), T, {{.w = &w, .y = y2.data()}});
          b.add_inplace(r2.data(), y2.data(), T * E);
          EXPECT_EQ(r1, r2) << dtype_name(t) << " silu_mul_matmul";
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagellm::cpu
