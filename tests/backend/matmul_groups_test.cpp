// Backend::matmul_groups (MLA's per-head absorptions: y_g = x_g W_g^T, the
// groups back to back): the CPU backend's one-region run gives matmul()'s
// bits per group and the interface default's, for row-major and repacked
// (Rows16) weights of float and quantized types, and agrees with a float64
// product of the stored weights; groups of different shapes are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/kernel_test_util.h"
#include "tensor/convert.h"
#include "util/error.h"

namespace pagellm::cpu {
namespace {

constexpr int64_t kGroups = 5, kOut = 32, kIn = 64;

// A stack of kGroups * kOut rows, as stored (Rows) or repacked (Rows16), and
// each group's view into it.
struct GroupedWeights {
  test::TestWeights w;
  std::unique_ptr<uint8_t[]> packed;
  std::vector<MatrixView> views;

  GroupedWeights(const CpuBackend& b, ThreadPool& pool, DType t, bool repack)
      : w(test::make_weights(t, kGroups * kOut, kIn, 7, test::WeightFill::Quantized)) {
    MatrixView all{t, kIn, kGroups * kOut, w.bytes.data(), w.stride, WeightLayout::Rows};
    if (repack)
      all = b.prepare_weights(all, all.n_out, [&](size_t n) {
        packed.reset(new uint8_t[n]);
        return static_cast<void*>(packed.get());
      }, pool);
    const int64_t units = kOut / layout_rows(all.layout);
    for (int64_t g = 0; g < kGroups; ++g) {
      MatrixView v = all;
      v.n_out = kOut;
      v.data = static_cast<const uint8_t*>(all.data) + static_cast<size_t>(g * units) * all.row_stride;
      views.push_back(v);
    }
  }
};

TEST(MatmulGroups, CpuGivesMatmulsBitsPerGroupAndMatchesFloat64) {
  ThreadPool pool(2);
  CpuBackend b(&pool);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (DType t : {DType::F32, DType::F16, DType::Q8_0})
    for (bool repack : {false, true})
      for (int64_t rows : {1, 3, 17}) {
        if (repack && t == DType::F32) continue;  // float weights stay row-major
        const GroupedWeights gw(b, pool, t, repack);
        std::vector<float> x(static_cast<size_t>(kGroups * rows * kIn));
        for (auto& v : x) v = nd(rng);
        const size_t ny = static_cast<size_t>(kGroups * rows * kOut);
        std::vector<float> grouped(ny, NAN), each(ny, NAN), fallback(ny, NAN);
        b.matmul_groups(x.data(), rows, gw.views.data(), kGroups, grouped.data());
        b.Backend::matmul_groups(x.data(), rows, gw.views.data(), kGroups, fallback.data());
        for (int64_t g = 0; g < kGroups; ++g)
          b.matmul(x.data() + g * rows * kIn, rows,
                   {{.w = &gw.views[static_cast<size_t>(g)], .y = each.data() + g * rows * kOut}});
        const std::string what = std::string(dtype_name(t)) + (repack ? " Rows16" : " Rows") +
                                 ", rows " + std::to_string(rows);
        std::vector<float> wrow(kIn);
        for (int64_t g = 0; g < kGroups; ++g)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t o = 0; o < kOut; ++o) {
              const size_t i = static_cast<size_t>((g * rows + r) * kOut + o);
              ASSERT_EQ(grouped[i], each[i]) << what << ", group " << g;
              ASSERT_EQ(grouped[i], fallback[i]) << what << ", group " << g;
              dequantize_row(t, gw.w.row(g * kOut + o), wrow.data(), kIn);
              double ref = 0, mag = 0;
              const float* xr = x.data() + (g * rows + r) * kIn;
              for (int64_t k = 0; k < kIn; ++k) {
                ref += double{xr[k]} * wrow[static_cast<size_t>(k)];
                mag += std::fabs(double{xr[k]} * wrow[static_cast<size_t>(k)]);
              }
              // Quantized weights take Q8_0 activations (~1/254 of a block's max).
              const double tol = t == DType::F32 ? 1e-5 * mag + 1e-6 : 1e-2 * mag + 1e-4;
              ASSERT_NEAR(grouped[i], ref, tol) << what << ", group " << g << " out " << o;
            }
      }
}

TEST(MatmulGroups, RefusesGroupsOfDifferentShapes) {
  ThreadPool pool(1);
  CpuBackend b(&pool);
  const GroupedWeights gw(b, pool, DType::Q8_0, false);
  std::vector<MatrixView> views = gw.views;
  views[2].n_out = kOut / 2;
  std::vector<float> x(static_cast<size_t>(kGroups * kIn)), y(static_cast<size_t>(kGroups * kOut));
  EXPECT_THROW(b.matmul_groups(x.data(), 1, views.data(), kGroups, y.data()), Error);
}

}  // namespace
}  // namespace pagellm::cpu
