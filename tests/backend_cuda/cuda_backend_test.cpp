// The CUDA backend's matmul epilogues (bias, then RoPE of the first heads)
// against the same backend's separate ops after a plain product (the same
// kernels: the same bits), and against a host reference (double-precision
// product, add_bias, the CPU backend's RoPE), through the GEMV (few rows)
// and GEMM (many rows) paths.
#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "backend/cuda/gemv_q8.h"
#include "backend/cuda/q8_activations.h"
#include "cuda_test_util.h"
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

TEST(CudaBackend, EpiloguesEqualBiasAndRopeAfterTheProduct) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaBackend gpu(0);
  ThreadPool pool(1);
  cpu::CpuBackend host(&pool);
  const int64_t n_in = 256;
  struct Case {
    int32_t head_dim, n_head, rope_heads, n_rot, rows;
  };
  // 80 rows: more than kGemvMaxRows, the GEMM path. rope_heads < n_head: the
  // output's last head is not rotated (v-like rows after q/k-like ones).
  for (Case c : {Case{64, 4, 4, 64, 5}, Case{128, 2, 2, 64, 3}, Case{64, 4, 3, 64, 80},
                 Case{80, 3, 3, 80, 17}}) {
    for (DType type : {DType::Q4_0, DType::Q8_0, DType::F16}) {
      for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
        SCOPED_TRACE(std::string(dtype_name(type)) + " head_dim " + std::to_string(c.head_dim) +
                     " rows " + std::to_string(c.rows) +
                     (style == RopeStyle::kNeox ? " neox" : " norm"));
        const int64_t n_out = int64_t{c.n_head} * c.head_dim;
        const auto w = test::make_weights(type, n_out, n_in, 7);
        const auto x = test::random_floats(static_cast<size_t>(c.rows * n_in), 8);
        const auto bias = test::random_floats(static_cast<size_t>(n_out), 9);
        std::vector<int32_t> positions;
        for (int32_t t = 0; t < c.rows; ++t) positions.push_back(2 + 9 * t);
        const Step step(positions);
        const StepInputs& in = step.in;
        const RopeParams rope{c.n_rot, 10000.0f, 1.0f};

        Buffer dw(gpu, w.bytes), dx(gpu, x), dbias(gpu, bias);
        const size_t out_bytes = static_cast<size_t>(c.rows * n_out) * sizeof(float);
        Buffer fused(gpu, out_bytes), apart(gpu, out_bytes);
        const MatrixView mw{type, n_in, n_out, dw.p, dtype_row_bytes(type, n_in)};
        gpu.begin_step(in, rope);
        gpu.reserve_matmul(mw, c.rows);
        gpu.matmul(dx.f(), c.rows, {{&mw, fused.f(), dbias.f(), c.rope_heads, c.head_dim, style}});
        gpu.matmul(dx.f(), c.rows, {{&mw, apart.f()}});
        gpu.add_bias(apart.f(), dbias.f(), c.rows, n_out, n_out);
        gpu.rope(apart.f(), n_out, c.rope_heads, c.head_dim, style);
        const std::vector<float> got = fused.floats(), sep = apart.floats();
        ASSERT_EQ(0, std::memcmp(got.data(), sep.data(), out_bytes));

        // Host: the exact product in double (of the int8 GEMV's activation
        // codes where it runs: q8_activations.h), the bias, the CPU's RoPE.
        std::vector<float> xv = x;
        if (c.rows <= CudaBackend::kGemvMaxRows && gemv_q8_supports(type)) {
          struct alignas(16) Chunk {
            uint8_t b[16];
          };
          std::vector<Chunk> q(q8_act_bytes(c.rows, n_in) / 16 + 1);
          quantize_q8_activations_host(x.data(), n_in, c.rows, n_in, q.data());
          const Q8ActView a = q8_act_view(q.data(), c.rows, n_in);
          for (int64_t i = 0; i < c.rows * n_in; ++i) xv[i] = a.d[i / 32] * a.qs[i];
        }
        std::vector<float> want(got.size());
        for (int64_t t = 0; t < c.rows; ++t)
          for (int64_t r = 0; r < n_out; ++r) {
            double s = 0;
            for (int64_t i = 0; i < n_in; ++i)
              s += static_cast<double>(w.values[r * n_in + i]) * xv[t * n_in + i];
            want[t * n_out + r] = static_cast<float>(s);
          }
        pagellm::add_bias(want.data(), bias.data(), c.rows, n_out, n_out);
        host.begin_step(in, rope);
        host.rope(want.data(), n_out, c.rope_heads, c.head_dim, style);
        // GEMV: f32 sums (CudaGemv: 1e-5); GEMM: operands rounded to f16.
        EXPECT_LE(test::rel_error(got, want), c.rows > CudaBackend::kGemvMaxRows ? 3e-3 : 1e-4);
      }
    }
  }
}

// A RoPE epilogue on rows that are not the step's tokens is refused.
TEST(CudaBackend, RopeEpilogueNeedsTheStepRows) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaBackend gpu(0);
  const auto w = test::make_weights(DType::F16, 64, 64, 1);
  Buffer dw(gpu, w.bytes), dx(gpu, size_t{4 * 64 * 4}), dy(gpu, size_t{4 * 64 * 4});
  const Step step({0, 1});
  gpu.begin_step(step.in, RopeParams{64, 10000.0f, 1.0f});
  const MatrixView mw{DType::F16, 64, 64, dw.p, dtype_row_bytes(DType::F16, 64)};
  EXPECT_THROW(gpu.matmul(dx.f(), 4, {{&mw, dy.f(), nullptr, 1, 64, RopeStyle::kNorm}}), Error);
}

}  // namespace
}  // namespace pagellm::cuda
