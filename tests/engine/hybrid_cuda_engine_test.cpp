// Hybrid models (qwen35, qwen35moe) on the CUDA backend, on a GPU machine;
// without a GPU each test is skipped ("no CUDA device"). The gated delta-net
// layers run delta_net.h's kernels with their states in the GPU's pool, the
// gated attention output the sigmoid_mul kernel: greedy tokens equal the
// CPU's, on one GPU and split with the host, batched (prompt chunks cut at
// 64 and by other sequences) and under preemption (states recomputed from
// zeros). The GPU's prompts take the one-token step where the CPU takes the
// chunked form, and its products round otherwise, so a request may part from
// the CPU only where the CPU's own top two were within kNearTie.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "backend/backend_factory.h"
#include "device/memory_probe.h"
#include "engine/engine_runner.h"
#include "engine/hybrid_models.h"
#include "model/make_model.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

bool have_gpu() {
  return cuda_backend_built() && SystemProbe().cuda_device_count() > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

// Log-probability gap (nats: the logits' gap) under which the CPU's choice
// counts as a near tie.
constexpr float kNearTie = 0.05f;

// Prompts around the 64-token cuts (tails of 1-3 tokens under the conv kernel).
std::vector<std::vector<int32_t>> prompts_for(const Tokenizer& tok, int n) {
  const int lengths[] = {5, 64, 65, 67, 130, 200, 17, 3, 70, 128};
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> id(3, tok.n_vocab() - 1);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p = {1};
    while (static_cast<int>(p.size()) < lengths[i % 10]) p.push_back(id(rng));
    out.push_back(std::move(p));
  }
  return out;
}

struct Greedy {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> gaps;  // per token: top-1 minus top-2 logprob
};

Greedy run_greedy(Loaded& m, const std::vector<std::vector<int32_t>>& prompts,
                  const EngineConfig& cfg, int gen, EngineStats* stats = nullptr) {
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  std::map<uint64_t, size_t> index;
  Greedy g;
  g.tokens.resize(prompts.size());
  g.gaps.resize(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.sampling.temperature = 0;
    r.max_tokens = gen;
    r.ignore_eos = true;
    r.logprobs = 2;
    index[engine.submit(r, [&g, &index](const SeqEvent& ev) {
      if (ev.token < 0) return;
      const size_t i = index.at(ev.request_id);
      g.tokens[i].push_back(ev.token);
      g.gaps[i].push_back(ev.top_logprobs.size() >= 2
                              ? ev.top_logprobs[0].logprob - ev.top_logprobs[1].logprob
                              : 1e9f);
    })] = i;
  }
  while (engine.has_work()) engine.step();
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0) << "leaked blocks";
  if (stats) *stats = engine.stats();
  return g;
}

// The GPU's tokens against the CPU's: equal, or parted where the CPU nearly
// tied; at most a quarter of the requests part.
void expect_cpu_tokens(const Greedy& cpu, const Greedy& gpu, const std::string& what) {
  int parted = 0;
  for (size_t i = 0; i < cpu.tokens.size(); ++i) {
    if (gpu.tokens[i] == cpu.tokens[i]) continue;
    size_t k = 0;
    while (k < gpu.tokens[i].size() && k < cpu.tokens[i].size() &&
           gpu.tokens[i][k] == cpu.tokens[i][k])
      ++k;
    ASSERT_LT(k, cpu.gaps[i].size()) << what << ": request " << i << " is shorter on the GPU";
    EXPECT_LT(cpu.gaps[i][k], kNearTie) << what << ": request " << i << " parts from the CPU at "
                                        << "token " << k << " where the CPU's choice was clear";
    ++parted;
  }
  EXPECT_LE(parted, static_cast<int>(cpu.tokens.size()) / 4) << what;
}

void check_model(const std::string& file) {
  Loaded cpu = load(file);
  const int32_t L = cpu.model->hparams().n_layer;
  ASSERT_TRUE(cpu.model->hparams().has_recurrent());
  const auto prompts = prompts_for(*cpu.tok, 12);
  const int gen = 12;
  EngineConfig batched;
  batched.num_blocks = 512;
  batched.scheduler.max_num_seqs = 16;
  batched.scheduler.max_batched_tokens = 128;
  EngineConfig tight = batched;
  tight.num_blocks = 40;  // sequences preempted, their states recomputed
  const Greedy want = run_greedy(cpu, prompts, batched, gen);
  const std::vector<std::vector<KvPoolPlacement>> splits = {
      {{"cuda:0", 0, L}},
      {{"cuda:0", 0, L / 2}, {"host", L / 2, L}},
      {{"host", 0, 1}, {"cuda:0", 1, L}}};
  for (const auto& placements : splits) {
    Loaded gpu = load(file, {.placements = placements});
    const std::string what = file + " from " + placements.front().device;
    expect_cpu_tokens(want, run_greedy(gpu, prompts, batched, gen), what + ", batched");
    EngineStats st;
    const Greedy pre = run_greedy(gpu, prompts, tight, gen, &st);
    EXPECT_GT(st.preemptions, 0u) << what;
    expect_cpu_tokens(want, pre, what + ", preempted");
  }
}

TEST(CudaHybridEngine, MadeModelsGiveTheCpuTokens) {
  REQUIRE_GPU();
  for (const char* arch : {"qwen35", "qwen35moe"}) check_model(hybrid_model(arch));
}

TEST(CudaHybridEngine, Arch2026Qwen35GivesTheCpuTokens) {
  REQUIRE_GPU();
  const std::string file = shared_path("golden/arch2026/rand-qwen35-tok512-F32.gguf");
  if (file.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent";
  check_model(file);
}

}  // namespace
}  // namespace pagellm
