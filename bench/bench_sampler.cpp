// The sampler's cost per step, against the time budget of a decode step: one
// row of logits per sequence (vocabulary 32000, the generated 8B-shape
// model's, or 128256, Llama 3's), drawn as the engine draws them.
//
//   Greedy        the plain greedy draw (first_argmax over the floats)
//   GreedyScan    the reference: the same token from a copy to double and a
//                 scalar scan, as the penalised path makes it
//   TopK40        temperature 0.8, top_k 40, top_p 0.95, min_p 0.05 (the
//                 defaults)
//   Full          temperature 1, no top_k / top_p / min_p (the OpenAI API's
//                 defaults: every token a candidate, in order)
//   Step/seqs     a step's draws for `seqs` sequences (defaults above), one
//                 after another on one thread (serial) or spread over the
//                 pool (the engine's parallel sampling)
//
//   bench_sampler [--benchmark_filter=...]     (PAGELLM_BENCH_THREADS, default 2)
#include <benchmark/benchmark.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "bench_pool.h"
#include "engine/sampler.h"

namespace {

using namespace pagellm;

std::vector<float> logits_rows(int64_t rows, int64_t vocab) {
  std::mt19937 gen(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> out(static_cast<size_t>(rows * vocab));
  for (float& x : out) x = d(gen);
  return out;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

void Greedy(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  const auto logits = logits_rows(1, vocab);
  Sampler s(greedy());
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits.data(), vocab, {}));
  state.SetBytesProcessed(state.iterations() * vocab * 4);
}

void GreedyScan(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  const auto logits = logits_rows(1, vocab);
  std::vector<double> copy(static_cast<size_t>(vocab));
  for (auto _ : state) {
    for (int i = 0; i < vocab; ++i)
      copy[static_cast<size_t>(i)] = std::isnan(logits[static_cast<size_t>(i)])
                                         ? -std::numeric_limits<double>::infinity()
                                         : logits[static_cast<size_t>(i)];
    int best = 0;
    for (int i = 1; i < vocab; ++i)
      if (copy[static_cast<size_t>(i)] > copy[static_cast<size_t>(best)]) best = i;
    benchmark::DoNotOptimize(best);
  }
  state.SetBytesProcessed(state.iterations() * vocab * 4);
}

void TopK40(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  const auto logits = logits_rows(1, vocab);
  Sampler s(SamplingParams{});
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits.data(), vocab, {}));
}

void Full(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  const auto logits = logits_rows(1, vocab);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  Sampler s(p);
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits.data(), vocab, {}));
}

void Step(benchmark::State& state, bool on_pool) {
  const int64_t seqs = state.range(0), vocab = state.range(1);
  const auto logits = logits_rows(seqs, vocab);
  std::vector<Sampler> samplers(static_cast<size_t>(seqs), Sampler(SamplingParams{}));
  std::vector<int32_t> out(static_cast<size_t>(seqs));
  auto one = [&](int64_t i) {
    out[static_cast<size_t>(i)] = samplers[static_cast<size_t>(i)].sample(
        logits.data() + i * vocab, static_cast<int>(vocab), {});
  };
  ThreadPool& pool = bench::pool();
  for (auto _ : state) {
    if (on_pool)
      pool.parallel_for(seqs, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) one(i);
      });
    else
      for (int64_t i = 0; i < seqs; ++i) one(i);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * seqs);  // draws/s
}

void StepSerial(benchmark::State& state) {
  Step(state, false);
}
void StepOnPool(benchmark::State& state) {
  Step(state, true);
}

}  // namespace

BENCHMARK(Greedy)->Arg(32000)->Arg(128256);
BENCHMARK(GreedyScan)->Arg(32000)->Arg(128256);
BENCHMARK(TopK40)->Arg(32000)->Arg(128256);
BENCHMARK(Full)->Arg(32000)->Arg(128256);
BENCHMARK(StepSerial)->Args({64, 32000})->Args({64, 128256})->UseRealTime();
BENCHMARK(StepOnPool)->Args({64, 32000})->Args({64, 128256})->UseRealTime();

BENCHMARK_MAIN();
