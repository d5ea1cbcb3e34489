#include "backend/cpu/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace pagellm {
namespace {

TEST(Ops, RmsNormMatchesFormula) {
  std::vector<float> x = {1, -2, 3, -4, 0.5f, 6}, w = {1, 2, 0.5f, 1, 1, -1}, out(6);
  rms_norm(x.data(), w.data(), out.data(), 2, 3, 1e-5f);
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < 3; ++i) ms += x[r * 3 + i] * x[r * 3 + i] / 3.0;
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(out[r * 3 + i], x[r * 3 + i] / std::sqrt(ms + 1e-5) * w[i], 1e-6);
  }
}

TEST(Ops, SiluMul) {
  std::vector<float> g = {-3, 0, 2}, u = {2, 5, -1};
  silu_mul(g.data(), u.data(), 3);
  EXPECT_NEAR(g[0], -3 / (1 + std::exp(3.0)) * 2, 1e-6);
  EXPECT_EQ(g[1], 0);
  EXPECT_NEAR(g[2], 2 / (1 + std::exp(-2.0)) * -1, 1e-6);
}

// gpt-oss's clamped SwiGLU against its formula in double, on both sides of
// the clamps (gate above 7, up outside [-7, 7]).
TEST(Ops, ClampedSwiglu) {
  std::vector<float> g = {-9, -1, 0.5f, 6.9f, 7.5f, 30}, u = {-8, -7, 0.25f, 3, 9, -2};
  const std::vector<float> g0 = g, u0 = u;
  glu(Activation::kSwigluClamped, g.data(), u.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = std::min(double{g0[i]}, 7.0), y = std::clamp(double{u0[i]}, -7.0, 7.0);
    EXPECT_NEAR(g[i], x / (1 + std::exp(-1.702 * x)) * (y + 1), 1e-5 * (1 + std::abs(g[i]))) << i;
  }
}

// Many values against the double formula, and each element the same bits
// whatever range it is computed in (callers split rows across threads).
TEST(Ops, SiluMulAccurateAndSplitInvariant) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  const int n = 1000;
  std::vector<float> g(n), u(n);
  for (int i = 0; i < n; ++i) g[i] = nd(rng), u[i] = nd(rng);
  g[0] = -120.0f, g[1] = 95.0f;  // exp under- and overflow
  std::vector<float> whole = g;
  silu_mul(whole.data(), u.data(), n);
  for (int i = 0; i < n; ++i) {
    const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    EXPECT_NEAR(whole[i], ref, 1e-6 * (1.0 + std::fabs(ref))) << i << " g=" << g[i];
  }
  for (int split : {1, 7, 13, 500, 999}) {
    std::vector<float> parts = g;
    silu_mul(parts.data(), u.data(), split);
    silu_mul(parts.data() + split, u.data() + split, n - split);
    for (int i = 0; i < n; ++i) ASSERT_EQ(parts[i], whole[i]) << "split " << split << " at " << i;
  }
}

// RoPE against the formula: pairs rotated by pos * base^(-2i/n_rot).
TEST(Ops, RopeNormAndNeox) {
  const int head_dim = 8, n_rot = 6, n_heads = 2;
  const float base = 500.0f;
  std::vector<int32_t> pos = {0, 7, 300};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
    std::vector<float> x(pos.size() * n_heads * head_dim);
    for (auto& v : x) v = nd(rng);
    std::vector<float> y = x;
    RopeCache rc(n_rot, base, 0.5f);
    rc.prepare(pos.data(), 3);
    rc.apply(y.data(), 3, n_heads * head_dim, n_heads, head_dim, style);
    for (int t = 0; t < 3; ++t)
      for (int h = 0; h < n_heads; ++h) {
        const float* a = x.data() + (t * n_heads + h) * head_dim;
        const float* b = y.data() + (t * n_heads + h) * head_dim;
        for (int i = 0; i < n_rot / 2; ++i) {
          const double th = pos[t] * 0.5 * std::pow(double(base), -2.0 * i / n_rot);
          const int i0 = style == RopeStyle::kNorm ? 2 * i : i;
          const int i1 = style == RopeStyle::kNorm ? 2 * i + 1 : i + n_rot / 2;
          EXPECT_NEAR(b[i0], a[i0] * std::cos(th) - a[i1] * std::sin(th), 1e-5);
          EXPECT_NEAR(b[i1], a[i0] * std::sin(th) + a[i1] * std::cos(th), 1e-5);
        }
        for (int i = n_rot; i < head_dim; ++i) EXPECT_EQ(b[i], a[i]);  // not rotated
      }
  }
}

}  // namespace
}  // namespace pagellm
