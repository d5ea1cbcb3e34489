// The CUDA gated delta-net kernels: their host renditions against the CPU
// kernels (the conv and the one-token step: the same bits; prompts, which the
// CPU runs in chunks: float rounding) and a float64 recurrence, and on a GPU
// the kernels against the host renditions.
#include "backend/cuda/delta_net.h"

#include <gtest/gtest.h>

#include "backend/cpu/delta_rule.h"
#include "backend/cpu/ssm_conv.h"
#include "backend/recurrent_test_util.h"
#include "cuda_test_util.h"

namespace pagellm::cuda {
namespace {

using pagellm::test::DeltaInputs;
using pagellm::test::DeltaShape;
using pagellm::test::SeqLayout;

// Three sequences of `rows` rows each (1: a decode step), states random.
struct DeltaCase {
  DeltaInputs in;
  SeqLayout lay;
  std::vector<float> states;
};

DeltaCase delta_case(const DeltaShape& shape, int32_t rows, uint64_t seed) {
  DeltaCase c{pagellm::test::random_delta_inputs(shape, 3 * rows, seed), {}, {}};
  for (int s = 0; s < 3; ++s) c.lay.add(rows, 2 - s, 17 * s + 5);
  c.states = test::random_floats(static_cast<size_t>(3 * shape.state_floats()), seed + 1, 0.3f);
  return c;
}

TEST(CudaDeltaNet, ConvHostRenditionIsTheCpuBits) {
  ThreadPool pool(2);
  const int C = 200, K = 4;
  const std::vector<float> x = test::random_floats(9 * C, 1), w = test::random_floats(C * K, 2, 0.5f),
                           bias = test::random_floats(C, 3, 0.1f);
  SeqLayout lay;
  lay.add(6, 1, 0);
  lay.add(1, 0, 9);
  lay.add(2, 2, 3);
  for (bool silu : {true, false}) {
    std::vector<float> st_cpu = test::random_floats(3 * (K - 1) * C, 4), st_gpu = st_cpu;
    std::vector<float> y_cpu(x.size()), y_gpu(x.size());
    SsmConvArgs a{x.data(), C, y_cpu.data(), C, w.data(), silu ? nullptr : bias.data(),
                  st_cpu.data(), (K - 1) * C, C, K, silu};
    pagellm::ssm_conv(a, lay.batch(), pool);
    a.y = y_gpu.data();
    a.states = st_gpu.data();
    ssm_conv_host(a, lay.batch());
    EXPECT_EQ(y_gpu, y_cpu);
    EXPECT_EQ(st_gpu, st_cpu);
  }
}

TEST(CudaDeltaNet, DecodeStepHostRenditionIsTheCpuBits) {
  ThreadPool pool(2);
  for (DeltaShape shape : {DeltaShape{}, DeltaShape{2, 4, 128, 128}, DeltaShape{1, 3, 24, 40}}) {
    DeltaCase c = delta_case(shape, 1, shape.d_v);
    std::vector<float> st_gpu = c.states, out_cpu(3 * shape.n_v_heads * shape.d_v), out_gpu = out_cpu;
    gated_delta_rule(c.in.args(c.states.data(), out_cpu.data()), c.lay.batch(), pool);
    gated_delta_rule_host(c.in.args(st_gpu.data(), out_gpu.data()), c.lay.batch());
    EXPECT_EQ(out_gpu, out_cpu) << shape.d_k;
    EXPECT_EQ(st_gpu, c.states) << shape.d_k;
  }
}

// A prompt: the CPU's chunks and the token-by-token rendition agree to float
// rounding, and both with float64.
TEST(CudaDeltaNet, PromptHostRenditionMatchesCpuAndFloat64) {
  ThreadPool pool(2);
  const DeltaShape shape{2, 4, 64, 64};
  const DeltaInputs in = pagellm::test::random_delta_inputs(shape, 300, 8);
  SeqLayout lay;
  lay.add(300, 0, 0);
  std::vector<float> st_cpu(static_cast<size_t>(shape.state_floats())), st_gpu = st_cpu;
  std::vector<float> out_cpu(300 * shape.n_v_heads * shape.d_v), out_gpu = out_cpu;
  gated_delta_rule(in.args(st_cpu.data(), out_cpu.data()), lay.batch(), pool);
  gated_delta_rule_host(in.args(st_gpu.data(), out_gpu.data()), lay.batch());
  std::vector<double> st_ref(st_cpu.size()), out_ref;
  pagellm::test::reference_delta_rule(in, 0, 300, st_ref, out_ref);
  EXPECT_LT(pagellm::test::rel_diff(out_gpu.data(), out_ref.data(), out_ref.size()), 5e-6);
  EXPECT_LT(pagellm::test::rel_diff(st_gpu.data(), st_ref.data(), st_ref.size()), 5e-6);
  EXPECT_LT(test::rel_error(out_gpu, out_cpu), 5e-6);
}

TEST(CudaDeltaNet, KernelsMatchTheHostRenditions) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  const DeltaShape shape{2, 4, 128, 128};
  for (int32_t rows : {1, 70}) {
    DeltaCase c = delta_case(shape, rows, 30 + rows);
    const size_t n_out = static_cast<size_t>(3 * rows * shape.n_v_heads * shape.d_v);
    std::vector<float> st_host = c.states, out_host(n_out);
    gated_delta_rule_host(c.in.args(st_host.data(), out_host.data()), c.lay.batch());
    DeviceBuffer qkv = test::upload(dev, c.in.qkv), al = test::upload(dev, c.in.alpha),
                 b = test::upload(dev, c.in.b), dt = test::upload(dev, c.in.dt_bias),
                 a = test::upload(dev, c.in.a), st = test::upload(dev, c.states),
                 out = test::upload(dev, std::vector<float>(n_out)),
                 begin = test::upload(dev, c.lay.begin), slot = test::upload(dev, c.lay.slot),
                 pos = test::upload(dev, c.lay.first_pos);
    GatedDeltaArgs args = c.in.args(st.as<float>(), out.as<float>());
    const int64_t k_off = shape.n_k_heads * shape.d_k;
    args.q = qkv.as<float>();
    args.k = qkv.as<float>() + k_off;
    args.v = qkv.as<float>() + 2 * k_off;
    args.alpha = al.as<float>();
    args.b = b.as<float>();
    args.dt_bias = dt.as<float>();
    args.a = a.as<float>();
    gated_delta_rule(dev, args,
                     RecurrentBatch{3, begin.as<int32_t>(), slot.as<int32_t>(), pos.as<int32_t>()});
    dev.synchronize();
    // The device's log1pf may move g by an ulp: close, not always the same bits.
    EXPECT_LT(test::rel_error(test::download<float>(dev, out, n_out), out_host), 1e-6);
    EXPECT_LT(test::rel_error(test::download<float>(dev, st, st_host.size()), st_host), 1e-6);
  }
}

}  // namespace
}  // namespace pagellm::cuda
