// CPU gated delta rule over one 4,096-token prompt on Qwen3.5-0.8B-like heads
// (16 key heads and 16 value heads of 128): the chunked form (one call) against
// the per-token recurrent step (4,096 one-token calls, as if every token were
// decoded), reported as microseconds per token; and one decode step of 16
// sequences. Inputs random, states in one pool.
//
//   bench_delta_rule [--benchmark_filter=...]     (PAGELLM_BENCH_THREADS, default 2)
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/delta_rule.h"
#include "bench_pool.h"

namespace {

using namespace pagellm;
using bench::pool;

constexpr int kKHeads = 16, kVHeads = 16, kDim = 128, kTokens = 4096;

struct Inputs {
  int64_t stride = 2 * kKHeads * kDim + kVHeads * kDim;
  std::vector<float> qkv, gates, dt_bias, a, states, out;
  explicit Inputs(int64_t rows, int seqs) {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0, 1);
    qkv.resize(static_cast<size_t>(rows * stride));
    for (float& x : qkv) x = nd(rng);
    gates.resize(static_cast<size_t>(rows * kVHeads));
    for (float& x : gates) x = nd(rng);
    dt_bias.assign(kVHeads, 0.0f);
    a.assign(kVHeads, -0.1f);
    states.assign(static_cast<size_t>(seqs) * kVHeads * kDim * kDim, 0.0f);
    out.resize(static_cast<size_t>(rows * kVHeads * kDim));
  }
  GatedDeltaArgs args() {
    GatedDeltaArgs g;
    g.q = qkv.data();
    g.k = qkv.data() + kKHeads * kDim;
    g.v = qkv.data() + 2 * kKHeads * kDim;
    g.qkv_stride = stride;
    g.alpha = g.b = gates.data();
    g.gate_stride = kVHeads;
    g.dt_bias = dt_bias.data();
    g.a = a.data();
    g.states = states.data();
    g.state_stride = static_cast<int64_t>(kVHeads) * kDim * kDim;
    g.out = out.data();
    g.out_stride = kVHeads * kDim;
    g.n_k_heads = kKHeads;
    g.n_v_heads = kVHeads;
    g.d_k = g.d_v = kDim;
    g.q_scale = 1.0f / std::sqrt(static_cast<float>(kDim));
    return g;
  }
};

// Microseconds per token: time / (tokens * 1e-6), through the rate counter.
void per_token_counter(benchmark::State& state, double tokens) {
  state.counters["us/token"] =
      benchmark::Counter(tokens * 1e-6 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_DeltaRulePrefillChunked(benchmark::State& state) {
  Inputs in(kTokens, 1);
  const int32_t begin[] = {0, kTokens}, slot[] = {0}, pos[] = {0};
  const RecurrentBatch batch{1, begin, slot, pos};
  for (auto _ : state) {
    gated_delta_rule(in.args(), batch, pool());
    benchmark::DoNotOptimize(in.out.data());
  }
  per_token_counter(state, kTokens);
}

void BM_DeltaRulePrefillPerToken(benchmark::State& state) {
  Inputs in(kTokens, 1);
  for (auto _ : state) {
    GatedDeltaArgs g = in.args();
    for (int t = 0; t < kTokens; ++t) {
      const int32_t begin[] = {t, t + 1}, slot[] = {0}, pos[] = {t};
      // Rows as offsets into the same buffers: token_begin addresses row t.
      gated_delta_rule(g, RecurrentBatch{1, begin, slot, pos}, pool());
    }
    benchmark::DoNotOptimize(in.out.data());
  }
  per_token_counter(state, kTokens);
}

void BM_DeltaRuleDecode16Seqs(benchmark::State& state) {
  constexpr int kSeqs = 16;
  Inputs in(kSeqs, kSeqs);
  int32_t begin[kSeqs + 1], slot[kSeqs], pos[kSeqs];
  for (int s = 0; s <= kSeqs; ++s) begin[s] = s;
  for (int s = 0; s < kSeqs; ++s) slot[s] = s, pos[s] = 1000;
  const RecurrentBatch batch{kSeqs, begin, slot, pos};
  for (auto _ : state) {
    gated_delta_rule(in.args(), batch, pool());
    benchmark::DoNotOptimize(in.out.data());
  }
  per_token_counter(state, kSeqs);
}

BENCHMARK(BM_DeltaRulePrefillChunked)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DeltaRulePrefillPerToken)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DeltaRuleDecode16Seqs)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
