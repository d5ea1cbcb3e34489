// Prefix caching on a hybrid model (qwen35: gated delta-net layers beside
// attention) through recurrent-state checkpoints (kvcache/state_checkpoints.h):
// requests sharing a system prompt compute it once, and every reply (greedy
// and sampled, its last prompt logits and every token's logprob) is the bits
// of the same request run alone without a cache, also under preemption.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "backend/recurrent_args.h"
#include "engine_runner.h"
#include "model/make_model.h"

namespace pagellm::test {
namespace {

// The models: make-model's qwen35 (context 2048: a 1,000-token system
// prompt) and the arch2026 reference file (context 512: the shared prompt is
// scaled down to 410 tokens, so that 16 prompts and replies fit).
struct Source {
  const char* name;
  int shared;  // tokens of the shared system prompt
};

std::string model_path(const Source& src) {
  if (std::string(src.name) == "golden") {
    const std::string p = shared_path("golden/arch2026/rand-qwen35-tok512-F32.gguf");
    return !p.empty() && std::filesystem::exists(p) ? p : "";
  }
  static std::unique_ptr<TempPath> made;
  if (!made) {
    made = std::make_unique<TempPath>(".gguf");
    MakeModelSpec spec;
    spec.arch = "qwen35";
    spec.n_embd = 128;
    spec.n_layer = 4;  // 0-2 gated delta-net, 3 full attention
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 128;
    spec.type = DType::Q8_0;
    spec.vocab_from = data_path("stories260K.gguf");
    ThreadPool pool(2);
    make_model(spec, made->path, pool);
  }
  return made->path;
}

struct Reply {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<float> prompt_logits;
  int64_t cached = 0;
};

struct RunResult {
  std::vector<Reply> replies;
  EngineStats stats;
};

Request make_request(const std::vector<int32_t>& prompt, int gen, bool sampled, uint64_t seed) {
  Request r;
  r.prompt = prompt;
  r.max_tokens = gen;
  r.ignore_eos = true;
  r.prompt_logits = true;
  r.logprobs = 0;
  r.sampling.temperature = sampled ? 0.9f : 0.0f;
  r.sampling.seed = seed;
  return r;
}

// Request i samples with seed first_seed + i.
// `one_by_one`: each request is submitted when the one before has finished.
RunResult run_prompts(Loaded& m, const std::vector<std::vector<int32_t>>& prompts,
                      EngineConfig cfg, int gen, bool sampled, uint64_t first_seed = 1000,
                      bool one_by_one = false) {
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  RunResult out;
  out.replies.resize(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Reply* r = &out.replies[i];
    engine.submit(make_request(prompts[i], gen, sampled, first_seed + i), [r](const SeqEvent& ev) {
      if (ev.token < 0) return;
      r->tokens.push_back(ev.token);
      r->logprobs.push_back(ev.logprob);
      if (!ev.prompt_logits.empty()) r->prompt_logits = ev.prompt_logits;
      r->cached = ev.cached_prompt_tokens;
    });
    if (one_by_one)
      while (engine.has_work()) engine.step();
  }
  while (engine.has_work()) engine.step();
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0) << "leaked blocks";
  out.stats = engine.stats();
  return out;
}

// 16 prompts: one shared 410-token system prompt, then 6..21 tokens of their own.
std::vector<std::vector<int32_t>> shared_prompts(const Tokenizer& tok, int shared) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> id(3, tok.n_vocab() - 1);
  std::vector<int32_t> system;
  for (int i = 0; i < shared; ++i) system.push_back(id(rng));
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 16; ++i) {
    auto p = system;
    for (int k = 6 + i; k > 0; --k) p.push_back(id(rng));
    out.push_back(p);
  }
  return out;
}

EngineConfig cached_config() {
  EngineConfig c;
  c.num_blocks = 1200;
  c.scheduler.max_num_seqs = 16;
  c.prefix_caching = true;
  return c;
}

void expect_equal_to_solo(Loaded& m, const std::vector<std::vector<int32_t>>& prompts,
                          const RunResult& cached, int gen, bool sampled) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineConfig alone = solo_config();  // no prefix cache
    alone.num_blocks = 128;
    const RunResult solo = run_prompts(m, {prompts[i]}, alone, gen, sampled, 1000 + i);
    ASSERT_EQ(solo.replies[0].tokens.size(), static_cast<size_t>(gen));
    const Reply& a = cached.replies[i];
    const Reply& b = solo.replies[0];
    EXPECT_EQ(b.cached, 0);
    EXPECT_EQ(a.tokens, b.tokens) << "request " << i;
    // Bit for bit: the same floats, not merely close ones.
    EXPECT_EQ(a.prompt_logits, b.prompt_logits) << "request " << i;
    EXPECT_EQ(a.logprobs, b.logprobs) << "request " << i;
  }
}

class HybridPrefixCache : public ::testing::TestWithParam<Source> {
 protected:
  void SetUp() override {
    path_ = model_path(GetParam());
    if (path_.empty()) GTEST_SKIP() << "../shared/golden/arch2026 (qwen35) is absent";
    m_ = load(path_);
    ASSERT_TRUE(m_.model->hparams().has_recurrent());
  }
  std::string path_;
  Loaded m_;
};

TEST_P(HybridPrefixCache, SharedSystemPromptIsComputedOnceAndRepliesEqualSoloRuns) {
  const int kShared = GetParam().shared, kGen = 12;
  const auto prompts = shared_prompts(*m_.tok, kShared);
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    const RunResult cached = run_prompts(m_, prompts, cached_config(), kGen, sampled);
    const int64_t shared_blocks = kShared / 16;
    // Requests 1..15 take all but at most one checkpoint interval of the
    // shared prompt from the cache; together >= 90% of its blocks.
    int64_t cached_tokens = 0, prompt_tokens = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const int64_t c = cached.replies[i].cached;
      prompt_tokens += static_cast<int64_t>(prompts[i].size());
      cached_tokens += c;
      EXPECT_EQ(c % kGatedDeltaChunk, 0) << "restored at an unaligned position";
      if (i > 0) EXPECT_GE(c, shared_blocks * 16 * 9 / 10) << "request " << i;
    }
    EXPECT_EQ(cached.replies[0].cached, 0);
    // Every prompt token not served by the cache was computed, no more: the
    // shared prompt once, and each request's rest after its checkpoint.
    EXPECT_EQ(cached.stats.prompt_tokens_computed,
              static_cast<uint64_t>(prompt_tokens - cached_tokens));
    EXPECT_LE(cached.stats.prompt_tokens_computed,
              static_cast<uint64_t>(kShared + 15 * (kShared / 10) + (prompt_tokens - 16 * kShared)));
    // The block counters /metrics reports: hits are the blocks reused.
    const auto& b = cached.stats.blocks;
    EXPECT_EQ(b.prefix_hits * 16, static_cast<uint64_t>(cached_tokens));
    EXPECT_GE(static_cast<double>(b.prefix_hits), 0.9 * 15 * static_cast<double>(shared_blocks));
    EXPECT_GE(static_cast<double>(b.prefix_hits) / static_cast<double>(b.prefix_queries), 0.9);
    expect_equal_to_solo(m_, prompts, cached, kGen, sampled);
  }
}

TEST_P(HybridPrefixCache, OneByOneTheSecondRequestSavesWhereTheSharedPromptEnds) {
  // The first request leaves the shared prompt's blocks in the cache; the
  // second finds them but no checkpoint near their end, computes them again
  // from the last checkpoint before and saves one there; the rest restore it.
  const int kShared = GetParam().shared, kGen = 6;
  auto prompts = shared_prompts(*m_.tok, kShared);
  prompts.resize(5);
  const RunResult cached =
      run_prompts(m_, prompts, cached_config(), kGen, /*sampled=*/false, 1000, /*one_by_one=*/true);
  const int64_t shared_blocks = kShared / 16;
  EXPECT_EQ(cached.replies[0].cached, 0);
  for (size_t i = 2; i < prompts.size(); ++i)
    EXPECT_GE(cached.replies[i].cached, shared_blocks * 16 * 9 / 10) << "request " << i;
  expect_equal_to_solo(m_, prompts, cached, kGen, /*sampled=*/false);
}

TEST_P(HybridPrefixCache, RestoredSequencesUnderPreemptionEqualSoloRuns) {
  // 40 blocks (640 tokens): one ~430-token sequence and a part of another,
  // so running sequences are preempted and resume from their checkpoints.
  constexpr int kShared = 300, kGen = 40;
  auto prompts = shared_prompts(*m_.tok, kShared);
  prompts.resize(5);
  EngineConfig c = cached_config();
  c.num_blocks = 40;
  c.scheduler.max_batched_tokens = 128;
  const RunResult cached = run_prompts(m_, prompts, c, kGen, /*sampled=*/true);
  EXPECT_GT(cached.stats.preemptions, 0u);
  EXPECT_GT(cached.stats.cached_prompt_tokens, 0u);
  expect_equal_to_solo(m_, prompts, cached, kGen, /*sampled=*/true);
}

TEST_P(HybridPrefixCache, CheckpointsEveryChunkAndOneEntryStillGiveTheSameBits) {
  // The smallest interval (one 64-token chunk) and a pool of one entry: most
  // checkpoints are evicted before they are used, the rest are restored.
  constexpr int kShared = 200, kGen = 8;
  auto prompts = shared_prompts(*m_.tok, kShared);
  prompts.resize(6);
  EngineConfig c = cached_config();
  c.state_checkpoint_tokens = 64;
  c.state_checkpoints = 1;
  const RunResult cached = run_prompts(m_, prompts, c, kGen, /*sampled=*/false);
  EXPECT_GT(cached.stats.cached_prompt_tokens, 0u);
  expect_equal_to_solo(m_, prompts, cached, kGen, /*sampled=*/false);
}

TEST_P(HybridPrefixCache, NoCheckpointsMeansNoPrefixCaching) {
  EngineConfig c = cached_config();
  c.state_checkpoints = 0;
  const auto prompts = shared_prompts(*m_.tok, 200);
  const RunResult r = run_prompts(m_, {prompts[0], prompts[1]}, c, 4, false);
  EXPECT_EQ(r.stats.cached_prompt_tokens, 0u);
  EXPECT_EQ(r.stats.blocks.prefix_queries, 0u);
}

TEST_P(HybridPrefixCache, BadCheckpointIntervalIsRefused) {
  ThreadPool pool(1);
  for (int32_t every : {-64, 32, 96, 100}) {
    EngineConfig c = cached_config();
    c.state_checkpoint_tokens = every;
    EXPECT_THROW(Engine(*m_.model, *m_.tok, pool, c), ConfigError) << every;
  }
}

INSTANTIATE_TEST_SUITE_P(Qwen35, HybridPrefixCache,
                         ::testing::Values(Source{"generated", 1000}, Source{"golden", 410}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pagellm::test
