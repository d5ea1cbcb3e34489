// Random gated delta-net inputs and float64 references of the recurrent ops
// (backend/recurrent_args.h), written from the math, not from the kernels:
// shared by the CPU and CUDA kernel tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/recurrent_args.h"

namespace pagellm::test {

// Sequences laid out one after another: rows, state slots, first positions.
struct SeqLayout {
  std::vector<int32_t> begin{0}, slot, first_pos;
  void add(int32_t n_rows, int32_t state_slot, int32_t pos) {
    begin.push_back(begin.back() + n_rows);
    slot.push_back(state_slot);
    first_pos.push_back(pos);
  }
  RecurrentBatch batch() const {
    return {static_cast<int32_t>(slot.size()), begin.data(), slot.data(), first_pos.data()};
  }
};

struct DeltaShape {
  int32_t n_k_heads = 2, n_v_heads = 4, d_k = 32, d_v = 32;
  int64_t qkv_stride() const { return 2 * n_k_heads * d_k + n_v_heads * d_v; }
  int64_t state_floats() const { return static_cast<int64_t>(n_v_heads) * d_k * d_v; }
};

// One step's inputs for `rows` rows: qkv rows [q | k | v], alpha and b rows.
struct DeltaInputs {
  DeltaShape shape;
  std::vector<float> qkv, alpha, b, dt_bias, a;
  int64_t rows = 0;
  GatedDeltaArgs args(float* states, float* out) const {
    GatedDeltaArgs g;
    g.q = qkv.data();
    g.k = qkv.data() + shape.n_k_heads * shape.d_k;
    g.v = qkv.data() + 2 * shape.n_k_heads * shape.d_k;
    g.qkv_stride = shape.qkv_stride();
    g.alpha = alpha.data();
    g.b = b.data();
    g.gate_stride = shape.n_v_heads;
    g.dt_bias = dt_bias.data();
    g.a = a.data();
    g.states = states;
    g.state_stride = shape.state_floats();
    g.out = out;
    g.out_stride = static_cast<int64_t>(shape.n_v_heads) * shape.d_v;
    g.n_k_heads = shape.n_k_heads;
    g.n_v_heads = shape.n_v_heads;
    g.d_k = shape.d_k;
    g.d_v = shape.d_v;
    g.eps = 1e-6f;
    g.q_scale = 1.0f / std::sqrt(static_cast<float>(shape.d_k));
    return g;
  }
  // Rows [r0, r0 + n) as their own inputs (a later call of the same sequence).
  DeltaInputs slice(int64_t r0, int64_t n) const {
    DeltaInputs s{shape, {}, {}, {}, dt_bias, a, n};
    const int64_t w = shape.qkv_stride(), h = shape.n_v_heads;
    s.qkv.assign(qkv.begin() + r0 * w, qkv.begin() + (r0 + n) * w);
    s.alpha.assign(alpha.begin() + r0 * h, alpha.begin() + (r0 + n) * h);
    s.b.assign(b.begin() + r0 * h, b.begin() + (r0 + n) * h);
    return s;
  }
};

// Gaussian q, k, v; per-head decays from fast (a = -e) to slow (a = -e^-5),
// so some heads carry their state over hundreds of tokens.
inline DeltaInputs random_delta_inputs(const DeltaShape& shape, int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-5.0f, 1.0f);
  DeltaInputs in{shape, {}, {}, {}, {}, {}, rows};
  in.qkv.resize(static_cast<size_t>(rows * shape.qkv_stride()));
  for (float& x : in.qkv) x = normal(rng);
  in.alpha.resize(static_cast<size_t>(rows * shape.n_v_heads));
  in.b.resize(in.alpha.size());
  for (float& x : in.alpha) x = normal(rng);
  for (float& x : in.b) x = normal(rng);
  for (int h = 0; h < shape.n_v_heads; ++h) {
    in.dt_bias.push_back(0.5f * normal(rng));
    in.a.push_back(-std::exp(uniform(rng)));
  }
  return in;
}

// The gated delta rule in float64, token by token (recurrent_args.h's math),
// on rows [r0, r0 + n) of `in` for one sequence whose state (n_v_heads
// states of [d_k][d_v]) is `state`; outputs to out rows [r0, r0 + n).
inline void reference_delta_rule(const DeltaInputs& in, int64_t r0, int64_t n,
                                 std::vector<double>& state, std::vector<double>& out) {
  const DeltaShape& sh = in.shape;
  const int dk = sh.d_k, dv = sh.d_v;
  out.resize(static_cast<size_t>(in.rows) * sh.n_v_heads * dv);
  auto normalized = [&](const float* x, double scale) {
    double ss = 0;
    for (int i = 0; i < dk; ++i) ss += static_cast<double>(x[i]) * x[i];
    std::vector<double> y(dk);
    for (int i = 0; i < dk; ++i) y[i] = x[i] / std::sqrt(ss + 1e-6) * scale;
    return y;
  };
  for (int64_t r = r0; r < r0 + n; ++r)
    for (int h = 0; h < sh.n_v_heads; ++h) {
      const int kh = h % sh.n_k_heads;
      const float* row = in.qkv.data() + r * sh.qkv_stride();
      const auto qn = normalized(row + kh * dk, 1.0 / std::sqrt(static_cast<double>(dk)));
      const auto kn = normalized(row + sh.n_k_heads * dk + kh * dk, 1.0);
      const float* v = row + 2 * sh.n_k_heads * dk + h * dv;
      const double x = static_cast<double>(in.alpha[r * sh.n_v_heads + h]) + in.dt_bias[h];
      const double g = std::log1p(std::exp(x)) * in.a[h];
      const double beta = 1.0 / (1.0 + std::exp(-static_cast<double>(in.b[r * sh.n_v_heads + h])));
      double* S = state.data() + static_cast<size_t>(h) * dk * dv;
      for (int e = 0; e < dk * dv; ++e) S[e] *= std::exp(g);
      for (int j = 0; j < dv; ++j) {
        double kv = 0;
        for (int i = 0; i < dk; ++i) kv += S[i * dv + j] * kn[i];
        const double d = beta * (v[j] - kv);
        for (int i = 0; i < dk; ++i) S[i * dv + j] += kn[i] * d;
        double o = 0;
        for (int i = 0; i < dk; ++i) o += S[i * dv + j] * qn[i];
        out[(r * sh.n_v_heads + h) * dv + j] = o;
      }
    }
}

// max |got - want| / max |want| over the elements.
inline double rel_diff(const float* got, const double* want, size_t n) {
  double diff = 0, ref = 1e-30;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    ref = std::max(ref, std::fabs(want[i]));
  }
  return diff / ref;
}

// The causal depthwise conv in float64 over one sequence: `hist` holds its
// kernel - 1 previous inputs (oldest first, [kernel - 1][channels]) and
// becomes the last kernel - 1 after rows x[0..n).
inline void reference_ssm_conv(const float* x, int64_t n, int channels, int kernel,
                               const std::vector<float>& weight, const float* bias, bool silu,
                               std::vector<double>& hist, std::vector<double>& y) {
  y.assign(static_cast<size_t>(n) * channels, 0);
  std::vector<double> window(hist);  // then the rows
  for (int64_t t = 0; t < n; ++t)
    for (int c = 0; c < channels; ++c) window.push_back(x[t * channels + c]);
  for (int64_t t = 0; t < n; ++t)
    for (int c = 0; c < channels; ++c) {
      double acc = bias ? bias[c] : 0.0;
      for (int k = 0; k < kernel; ++k)
        acc += weight[c * kernel + k] * window[(t + k) * channels + c];
      y[t * channels + c] = silu ? acc / (1.0 + std::exp(-acc)) : acc;
    }
  hist.assign(window.end() - static_cast<int64_t>(kernel - 1) * channels, window.end());
}

}  // namespace pagellm::test
