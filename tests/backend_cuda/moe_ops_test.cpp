// The CUDA mixture-of-experts kernels: the combine's host rendition against
// the CPU backend's (the same fused multiply-adds in slot order, so the same
// bits), and on a GPU the kernels against the host renditions.
#include "backend/cuda/moe_ops.h"

#include <gtest/gtest.h>

#include <random>

#include "backend/backend.h"
#include "cuda_test_util.h"

namespace pagellm::cuda {
namespace {

using test::download;
using test::upload;

struct MoeCase {
  int64_t n = 0, tokens = 0;
  int32_t k = 0;
  std::vector<float> y, weights, out;
  std::vector<int32_t> rows;
};

MoeCase random_case(uint32_t seed, int64_t n, int64_t tokens, int32_t k) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  MoeCase c{n, tokens, k, {}, {}, {}, {}};
  c.y.resize(static_cast<size_t>(tokens * k * n));
  for (float& v : c.y) v = normal(rng);
  c.out.resize(static_cast<size_t>(tokens * n));
  for (float& v : c.out) v = normal(rng);
  c.rows.resize(static_cast<size_t>(tokens * k));
  for (size_t i = 0; i < c.rows.size(); ++i) c.rows[i] = static_cast<int32_t>(i);
  std::shuffle(c.rows.begin(), c.rows.end(), rng);  // grouped rows in any order
  for (int64_t t = 0; t < tokens; ++t) {
    float sum = 0;
    for (int32_t j = 0; j < k; ++j) sum += c.weights.emplace_back(std::abs(normal(rng)) + 0.1f);
    for (int32_t j = 0; j < k; ++j) c.weights[static_cast<size_t>(t * k + j)] /= sum;
  }
  return c;
}

TEST(CudaMoeOps, CombineHostRenditionIsTheCpuBackendsBits) {
  for (bool add : {false, true}) {
    MoeCase c = random_case(3, 96, 17, 3);
    std::vector<float> cpu = c.out, gpu_host = c.out;
    combine_rows_host(c.y.data(), c.n, c.rows.data(), c.weights.data(), c.tokens, c.k,
                      gpu_host.data(), add);
    pagellm::combine_rows_host(c.y.data(), c.n, c.rows.data(), c.weights.data(), c.tokens, c.k,
                               cpu.data(), add);
    EXPECT_EQ(gpu_host, cpu) << "add " << add;
  }
}

TEST(CudaMoeOps, KernelsMatchTheHostRenditions) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  MoeCase c = random_case(5, 4096, 33, 8);
  // gather: out[i] = y[rows[i]]
  DeviceBuffer dy = upload(dev, c.y), drows = upload(dev, c.rows), dw = upload(dev, c.weights);
  DeviceBuffer dg(dev, c.y.size() * sizeof(float));
  gather_rows(dev, dy.as<float>(), c.n, drows.as<int32_t>(), c.tokens * c.k, dg.as<float>());
  const auto g = download<float>(dev, dg, c.y.size());
  for (size_t i = 0; i < c.rows.size(); ++i)
    for (int64_t e = 0; e < c.n; ++e)
      ASSERT_EQ(g[i * static_cast<size_t>(c.n) + static_cast<size_t>(e)],
                c.y[static_cast<size_t>(c.rows[i] * c.n + e)]);
  for (bool add : {false, true}) {
    std::vector<float> want = c.out;
    combine_rows_host(c.y.data(), c.n, c.rows.data(), c.weights.data(), c.tokens, c.k,
                      want.data(), add);
    DeviceBuffer dout = upload(dev, c.out);
    combine_rows(dev, dy.as<float>(), c.n, drows.as<int32_t>(), dw.as<float>(), c.tokens, c.k,
                 dout.as<float>(), add);
    EXPECT_EQ(download<float>(dev, dout, c.out.size()), want) << "add " << add;
  }
}

}  // namespace
}  // namespace pagellm::cuda
