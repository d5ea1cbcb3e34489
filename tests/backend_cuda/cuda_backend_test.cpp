// The CUDA backend's matmul bias epilogue against the same backend's
// separate ops after a plain product (the same kernels: the same bits), and
// against a host reference (double-precision product, add_bias), through
// the GEMV (few rows), int8 tensor-core (tens of rows) and GEMM (many rows)
// paths; the fused RoPE + KV write and norm / SwiGLU paths against their
// parts.
#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "backend/cuda/gemv_q8.h"
#include "backend/cuda/q8_activations.h"
#include "cuda_test_util.h"
#include "q8_test_util.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pagellm::cuda {
namespace {

// A host vector copied into a buffer of the backend.
struct Buffer {
  Backend& b;
  size_t bytes;
  void* p;
  Buffer(Backend& be, size_t n) : b(be), bytes(n), p(be.allocate(n)) {}
  template <typename T>
  Buffer(Backend& be, const std::vector<T>& v) : Buffer(be, v.size() * sizeof(T)) {
    b.upload(p, v.data(), bytes);
  }
  ~Buffer() { b.deallocate(p, bytes); }
  float* f() const { return static_cast<float*>(p); }
  std::vector<float> floats() const {
    std::vector<float> v(bytes / sizeof(float));
    b.download(v.data(), p, bytes);
    return v;
  }
};

// A step of n tokens of one sequence at the given positions, no KV blocks.
struct Step {
  std::vector<int32_t> positions, seqs;
  std::vector<int64_t> slots;
  int32_t no_blocks = 0;
  const int32_t* no_table = nullptr;
  StepInputs in;
  explicit Step(std::vector<int32_t> pos)
      : positions(std::move(pos)), seqs(positions.size(), 0), slots(positions.size(), 0) {
    in.n_tokens = static_cast<int32_t>(positions.size());
    in.n_seqs = 1;
    in.positions = positions.data();
    in.token_seq = seqs.data();
    in.slots = slots.data();
    in.block_tables = &no_table;
    in.block_counts = &no_blocks;
  }
  Step(const Step&) = delete;  // `in` points into this object
  Step& operator=(const Step&) = delete;
};

// A bias epilogue equals the product then add_bias, bit for bit, and the
// exact product plus the bias within the path's rounding.
TEST(CudaBackend, BiasEpilogueEqualsAddBiasAfterTheProduct) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaBackend gpu(0);
  const int64_t n_in = 256;
  // 80 rows: more than kGemvMaxRows, the int8 mmq path (F16: GEMM); 200: the
  // GEMM path.
  for (int64_t rows : {5, 3, 80, 17, 200}) {
    for (DType type : {DType::Q4_0, DType::Q8_0, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " rows " + std::to_string(rows));
      const int64_t n_out = 192;
      const auto w = test::make_weights(type, n_out, n_in, 7);
      const auto x = test::random_floats(static_cast<size_t>(rows * n_in), 8);
      const auto bias = test::random_floats(static_cast<size_t>(n_out), 9);
      std::vector<int32_t> positions;
      for (int32_t t = 0; t < rows; ++t) positions.push_back(2 + 9 * t);
      const Step step(positions);
      Buffer dw(gpu, w.bytes), dx(gpu, x), dbias(gpu, bias);
      const size_t out_bytes = static_cast<size_t>(rows * n_out) * sizeof(float);
      Buffer fused(gpu, out_bytes), apart(gpu, out_bytes);
      const MatrixView mw{type, n_in, n_out, dw.p, dtype_row_bytes(type, n_in)};
      gpu.begin_step(step.in, RopeParams{64, 10000.0f, 1.0f});
      gpu.reserve_matmul(mw, rows);
      gpu.matmul(dx.f(), rows, {{&mw, fused.f(), dbias.f()}});
      gpu.matmul(dx.f(), rows, {{&mw, apart.f()}});
      gpu.add_bias(apart.f(), dbias.f(), rows, n_out, n_out);
      const std::vector<float> got = fused.floats(), sep = apart.floats();
      ASSERT_EQ(0, std::memcmp(got.data(), sep.data(), out_bytes));

      // Host: the exact product in double (of the int8 GEMV's activation
      // codes where it runs: q8_activations.h), then the bias.
      std::vector<float> xv = x;
      const bool int8 = rows <= CudaBackend::kMmqMaxRows && gemv_q8_supports(type);
      if (int8) {
        const test::HostAct a(x, n_in, rows, n_in);
        for (int64_t t = 0; t < rows; ++t)
          for (int64_t i = 0; i < n_in; ++i) xv[t * n_in + i] = static_cast<float>(a.value(t, i));
      }
      std::vector<float> want =
          test::reference_product(w.values, n_out, n_in, xv, n_in, rows, n_out);
      pagellm::add_bias(want.data(), bias.data(), rows, n_out, n_out);
      // GEMV, mmq: f32 sums (CudaGemv: 1e-5); GEMM: operands rounded to f16.
      const bool f32_sums = int8 || rows <= CudaBackend::kGemvMaxRows;
      EXPECT_LE(test::rel_error(got, want), f32_sums ? 1e-4 : 3e-3);
    }
  }
}

// rope_kv_write (one launch) leaves the q rows and cache bytes that the
// Backend's default composition (rope of q, rope of k, kv_write) leaves, and
// the CPU backend's q and f32 cache within RoPE's rounding; k may stay as it
// was.
TEST(CudaBackend, RopeKvWriteEqualsRopeThenKvWrite) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaBackend gpu(0);
  ThreadPool pool(1);
  cpu::CpuBackend host(&pool);
  const int32_t n_heads = 8, n_kv = 2, hd = 64;
  Step step({0, 7, 300});
  step.slots = {4, 9, 1};
  step.in.slots = step.slots.data();
  const int64_t T = 3, slots = 16;
  const auto q = test::random_floats(T * n_heads * hd, 1),
             k = test::random_floats(T * n_kv * hd, 2);
  const auto v = test::random_floats(T * n_kv * hd, 3);
  for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
    for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + (style == RopeStyle::kNeox ? " neox" : ""));
      const size_t cache = static_cast<size_t>(slots * n_kv) * dtype_row_bytes(type, hd);
      Buffer q1(gpu, q), k1(gpu, k), dv(gpu, v), kc1(gpu, cache), vc1(gpu, cache);
      Buffer q2(gpu, q), k2(gpu, k), kc2(gpu, cache), vc2(gpu, cache);
      gpu.begin_step(step.in, RopeParams{hd, 10000.0f, 1.0f});
      gpu.rope_kv_write({kc1.p, vc1.p, type, 16, n_kv, hd}, q1.f(), n_heads, k1.f(), dv.f(), style);
      gpu.Backend::rope_kv_write({kc2.p, vc2.p, type, 16, n_kv, hd}, q2.f(), n_heads, k2.f(),
                                 dv.f(), style);
      EXPECT_EQ(q1.floats(), q2.floats());
      std::vector<uint8_t> b1(cache), b2(cache);
      gpu.download(b1.data(), kc1.p, cache);
      gpu.download(b2.data(), kc2.p, cache);
      EXPECT_TRUE(b1 == b2) << "K cache";
      gpu.download(b1.data(), vc1.p, cache);
      gpu.download(b2.data(), vc2.p, cache);
      EXPECT_TRUE(b1 == b2) << "V cache";
      EXPECT_EQ(k1.floats(), k);
      if (type != DType::F32) continue;
      // The CPU backend, same call.
      std::vector<float> hq = q, hk = k, hkc(cache / 4, 0.0f), hvc(cache / 4, 0.0f);
      host.begin_step(step.in, RopeParams{hd, 10000.0f, 1.0f});
      host.rope_kv_write({hkc.data(), hvc.data(), type, 16, n_kv, hd}, hq.data(), n_heads,
                         hk.data(), v.data(), style);
      EXPECT_LE(test::rel_error(q1.floats(), hq), 1e-6);
      EXPECT_LE(test::rel_error(kc1.floats(), hkc), 1e-6);
      EXPECT_EQ(vc1.floats(), hvc);
    }
  }
}

TEST(CudaBackend, RopeKvWriteNeedsAStep) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaBackend gpu(0);
  Buffer q(gpu, size_t{64 * 4}), c(gpu, size_t{16 * 64 * 2});
  EXPECT_THROW(gpu.rope_kv_write({c.p, c.p, DType::F16, 16, 1, 64}, q.f(), 1, q.f(), q.f(),
                                 RopeStyle::kNorm),
               Error);
}

// The fused paths (norm or SwiGLU straight to int8, several matrices in one
// launch) give the bits of the plain calls: rms_norm / silu_mul into f32,
// then one matmul per matrix. Mixed types (Q4_K with Q6_K, as Q4_K_M files)
// and a type without int8 kernel (F16, which takes the unfused path). 5 rows
// take the int8 GEMV, 48 the int8 mmq.
class CudaBackendFused : public ::testing::TestWithParam<int64_t> {};

TEST_P(CudaBackendFused, NormSwigluAndMultiMatrixLaunchesEqualThePlainCalls) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaBackend gpu(0);
  const int64_t n_in = 512, rows = GetParam();
  std::vector<int32_t> positions;
  for (int32_t t = 0; t < rows; ++t) positions.push_back(t);
  const Step step(positions);
  gpu.begin_step(step.in, RopeParams{64, 10000.0f, 1.0f});
  const auto x = test::random_floats(rows * n_in, 1, 2.0f), norm = test::random_floats(n_in, 2);
  const auto up = test::random_floats(rows * n_in, 3);
  Buffer dx(gpu, x), dnorm(gpu, norm), dup(gpu, up), h(gpu, x.size() * 4), g(gpu, x);
  for (const std::vector<DType>& types : {std::vector<DType>{DType::Q4_0, DType::Q4_0, DType::Q4_0},
                                          std::vector<DType>{DType::Q4_K, DType::Q4_K, DType::Q6_K},
                                          std::vector<DType>{DType::Q8_0, DType::F16}}) {
    SCOPED_TRACE(dtype_name(types.back()));
    std::vector<test::HostWeights> w;
    std::vector<std::unique_ptr<Buffer>> dw, fused, plain;
    std::vector<MatrixView> mv;
    const int64_t n_out[] = {96, 32, 64};
    for (size_t i = 0; i < types.size(); ++i) {
      w.push_back(test::make_weights(types[i], n_out[i], n_in, 10 + i));
      dw.push_back(std::make_unique<Buffer>(gpu, w.back().bytes));
      fused.push_back(std::make_unique<Buffer>(gpu, size_t(rows * n_out[i] * 4)));
      plain.push_back(std::make_unique<Buffer>(gpu, size_t(rows * n_out[i] * 4)));
      mv.push_back({types[i], n_in, n_out[i], dw.back()->p, dtype_row_bytes(types[i], n_in)});
    }
    std::vector<MatmulOutput> outs_fused, outs_plain;
    for (size_t i = 0; i < types.size(); ++i) {
      outs_fused.push_back({&mv[i], fused[i]->f()});
      outs_plain.push_back({&mv[i], plain[i]->f()});
    }
    for (size_t i = 0; i < mv.size(); ++i) gpu.reserve_matmul(mv[i], rows);

    gpu.norm_matmul(dx.f(), dnorm.f(), 1e-5f, h.f(), rows, outs_fused.data(), outs_fused.size());
    gpu.rms_norm(dx.f(), dnorm.f(), h.f(), rows, n_in, 1e-5f);
    for (const MatmulOutput& o : outs_plain) gpu.matmul(h.f(), rows, &o, 1);
    for (size_t i = 0; i < mv.size(); ++i)
      EXPECT_EQ(fused[i]->floats(), plain[i]->floats()) << "norm_matmul, matrix " << i;

    gpu.silu_mul_matmul(g.f(), dup.f(), rows, outs_fused.data(), outs_fused.size());
    gpu.upload(g.p, x.data(), g.bytes);  // gate may have been overwritten
    gpu.silu_mul(g.f(), dup.f(), rows * n_in);
    for (const MatmulOutput& o : outs_plain) gpu.matmul(g.f(), rows, &o, 1);
    for (size_t i = 0; i < mv.size(); ++i)
      EXPECT_EQ(fused[i]->floats(), plain[i]->floats()) << "silu_mul_matmul, matrix " << i;
    gpu.upload(g.p, x.data(), g.bytes);

    // The residual epilogue (made by the int8 GEMV where it runs) equals the
    // product, then add_inplace.
    const auto res = test::random_floats(rows * n_out[0], 4);
    Buffer r1(gpu, res), r2(gpu, res);
    MatmulOutput with_add = outs_fused[0], alone = outs_plain[0];
    with_add.add_to = r1.f();
    gpu.matmul(dx.f(), rows, &with_add, 1);
    gpu.matmul(dx.f(), rows, &alone, 1);
    gpu.add_inplace(r2.f(), plain[0]->f(), rows * n_out[0]);
    EXPECT_EQ(fused[0]->floats(), plain[0]->floats()) << "matmul with add_to: y";
    EXPECT_EQ(r1.floats(), r2.floats()) << "matmul with add_to: the sum";
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, CudaBackendFused, ::testing::Values(5, 48));

}  // namespace
}  // namespace pagellm::cuda
