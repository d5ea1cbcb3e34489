// The engine end to end on real models: batch invariance (alone vs in a batch
// of 32, with chunked prefill and with preemption), prefix caching, n > 1
// sampling with copy-on-write, stop strings, abort.
#include "engine/engine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <string_view>

#include "engine/engine_runner.h"
#include "model/make_model.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

void check_batch_invariance(const std::string& model_file) {
  Loaded m = load(model_file);
  auto prompts = make_prompts(*m.tok, 32);
  const int gen = 20;
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) solo.push_back(run_all(m, {p}, solo_config(), gen)[0]);

  EngineConfig batched;
  batched.num_blocks = 256;
  batched.scheduler.max_num_seqs = 64;
  batched.scheduler.max_batched_tokens = 300;
  EngineStats st;
  auto together = run_all(m, prompts, batched, gen, &st);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i], solo[i]) << "request " << i;
  EXPECT_EQ(st.preemptions, 0u);

  // Tiny chunks: every prompt is prefilled over several steps.
  batched.scheduler.max_batched_tokens = 7;
  auto chunked = run_all(m, prompts, batched, gen);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(chunked[i], solo[i]) << "request " << i;

  // A cache far too small for 32 sequences at once: preemption and recompute.
  EngineConfig tight = batched;
  tight.num_blocks = 12;
  tight.scheduler.max_batched_tokens = 64;
  auto preempted = run_all(m, prompts, tight, gen, &st);
  EXPECT_GT(st.preemptions, 0u);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(preempted[i], solo[i]) << "request " << i;
  std::printf("%s: 32 requests; preemptions with a 12-block cache: %llu\n", model_file.c_str(),
              static_cast<unsigned long long>(st.preemptions));

  // Preemption by swap: a preempted sequence's full blocks go to the host
  // tier when the pool evicts them and are restored from there when it
  // resumes (engine/host_tier.h's rule: a copy beats recomputing them here).
  // Models that keep no whole prefix (sliding windows, recurrent layers) get
  // no tier: their preempted sequences are recomputed, as checked above.
  if (m.model->hparams().no_prefix_tier_reason()) return;
  EngineConfig swap = tight;
  swap.host_tier.max_bytes = 16 << 20;
  auto swapped = run_all(m, prompts, swap, gen, &st);
  EXPECT_GT(st.preemptions, 0u);
  EXPECT_TRUE(st.host_tier);
  EXPECT_GT(st.host.hits, 0u);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(swapped[i], solo[i]) << "request " << i;
}

TEST(EngineBatchInvariance, Stories260K) {
  check_batch_invariance("stories260K.gguf");
}

TEST(EngineBatchInvariance, RandomQ4_0) {
  check_batch_invariance("golden/random/rand-llama-tok512-Q4_0.gguf");
}

// The engine's weight types beyond the files above: a small llama written by
// make-model with every 2-D weight of type `t` (n_embd and n_ff multiples of
// 256 for the K-quants and IQ4_XS), through the same alone-vs-batched checks:
// decode batches of 2 to 32 rows through each type's Rows16 kernels.
void check_batch_invariance_of_type(DType t) {
  TempPath path(".gguf");
  MakeModelSpec spec;
  spec.arch = "llama";
  spec.n_embd = 256;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 512;
  spec.type = t;
  spec.vocab_from = data_path("stories260K.gguf");
  ThreadPool pool(2);
  make_model(spec, path.path, pool);
  check_batch_invariance(path.path);
}

TEST(EngineBatchInvariance, EveryRows16Type) {
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::MXFP4,
                  DType::Q4_1, DType::Q5_0, DType::Q2_K, DType::Q3_K}) {
    SCOPED_TRACE(dtype_name(t));
    check_batch_invariance_of_type(t);
  }
}

// Every architecture family (tests/data/golden/arch): prompts of up to ~50
// positions cross the gemma models' 32-token windows. "make-model:ARCH": a
// family without a file in tests/data, written by make-model.
const char* const kFamilyModels[] = {
    "golden/arch/rand-qwen3-tok512-Q8_0.gguf",   "golden/arch/rand-gemma3-tok512-Q8_0.gguf",
    "golden/arch/rand-gemma2-tok512-Q8_0.gguf",  "golden/arch/rand-phi3-tok512-Q8_0.gguf",
    "golden/arch/rand-olmo2-tok512-Q8_0.gguf",   "golden/arch/rand-llama31-tok512-Q8_0.gguf",
    "golden/arch/rand-mixtral-tok512-Q8_0.gguf", "golden/arch/rand-qwen3moe-tok512-Q8_0.gguf",
    "make-model:smollm3", "make-model:deepseek2", "make-model:gemma4", "make-model:gpt-oss"};

constexpr std::string_view kMakeModel = "make-model:";

std::string family_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string s = info.param;
  if (s.starts_with(kMakeModel)) {
    s = s.substr(kMakeModel.size());
    std::replace(s.begin(), s.end(), '-', '_');  // gpt-oss: test names take no '-'
    return s;
  }
  s = s.substr(s.find("rand-") + 5);
  s = s.substr(0, s.find("-tok"));
  return s;
}

class EngineFamilies : public ::testing::TestWithParam<const char*> {
 protected:
  // The parameter's model file: a "make-model:" family is written once per
  // run (8 layers, so two of smollm3's are NoPE; the shipped vocabulary).
  static std::string model_file(const std::string& param) {
    if (!param.starts_with(kMakeModel)) return param;
    static std::map<std::string, std::unique_ptr<TempPath>> made;
    auto& path = made[param];
    if (!path) {
      path = std::make_unique<TempPath>(".gguf");
      MakeModelSpec spec;
      spec.arch = param.substr(kMakeModel.size());
      spec.n_embd = 128;
      spec.n_layer = 8;
      spec.n_head = 4;
      spec.n_head_kv = 2;
      spec.n_ff = 256;
      spec.type = DType::Q8_0;
      // As real gpt-oss files: MXFP4 expert stacks.
      if (spec.arch == "gpt-oss") spec.expert_type = DType::MXFP4;
      spec.vocab_from = data_path("stories260K.gguf");
      ThreadPool pool(2);
      make_model(spec, path->path, pool);
    }
    return path->path;
  }
};

// Layers split over 2 and 3 devices (each with its own KV pool) give the same
// tokens as one device, batched and under preemption.
void check_multi_device(const std::string& model_file) {
  Loaded m = load(model_file);
  const int32_t L = m.model->hparams().n_layer;
  auto prompts = make_prompts(*m.tok, 16);
  const int gen = 16;
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) solo.push_back(run_all(m, {p}, solo_config(), gen)[0]);
  const std::vector<std::vector<KvPoolPlacement>> splits = {
      {{"cpu:0", 0, L / 2}, {"host", L / 2, L}},
      {{"cpu:0", 0, 1}, {"cpu:1", 1, L - 1}, {"host", L - 1, L}}};
  for (const auto& placements : splits) {
    EngineConfig cfg;
    cfg.num_blocks = 10;  // tight: forces preemption
    cfg.scheduler.max_batched_tokens = 48;
    m.model->place(placements);  // the engine's KV pools follow the layers
    EngineStats st;
    auto got = run_all(m, prompts, cfg, gen, &st);
    EXPECT_GT(st.preemptions, 0u);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(got[i], solo[i]) << placements.size() << " devices, request " << i;
  }
}

TEST(EngineMultiDevice, Stories260K) {
  check_multi_device("stories260K.gguf");
}
TEST(EngineMultiDevice, RandomQ8_0) {
  check_multi_device("golden/random/rand-llama-tok512-Q8_0.gguf");
}

TEST_P(EngineFamilies, BatchInvariance) {
  check_batch_invariance(model_file(GetParam()));
}
TEST_P(EngineFamilies, MultiDevice) {
  check_multi_device(model_file(GetParam()));
}
INSTANTIATE_TEST_SUITE_P(Arch, EngineFamilies, ::testing::ValuesIn(kFamilyModels), family_name);

// deepseek2 with every prompt position in MLA's plain form (model/mla_block.h;
// off by default): batched, chunked, preempted (recomputed and swapped) and
// split over devices, each request's tokens alone.
class EngineMlaPlain : public EngineFamilies {};
TEST_F(EngineMlaPlain, PromptsKeepBatchInvarianceAndDeviceSplits) {
  struct Env {  // read when the model loads
    Env() { setenv("PAGELLM_MLA_PLAIN_MIN_PROMPT", "0", 1); }
    ~Env() { unsetenv("PAGELLM_MLA_PLAIN_MIN_PROMPT"); }
  } env;
  const std::string file = model_file("make-model:deepseek2");
  check_batch_invariance(file);
  check_multi_device(file);
}

// A story opening of more than two 16-token blocks that prompts share.
std::vector<int32_t> shared_story_prefix(const Tokenizer& tok) {
  return tok.encode(
      "Once upon a time, in a small town near the sea, there lived a little girl named Mia. Mia "
      "had a red kite that she loved more than anything.");
}

TEST(EnginePrefixCache, SecondRequestComputesOnlyUnsharedTokens) {
  Loaded m = load("stories260K.gguf");
  const std::vector<int32_t> shared = shared_story_prefix(*m.tok);
  ASSERT_GT(shared.size(), 40u);
  std::vector<int32_t> p1 = shared, p2 = shared;
  for (int32_t t : m.tok->encode(" One day", false)) p1.push_back(t);
  for (int32_t t : m.tok->encode(" The dog", false)) p2.push_back(t);

  auto uncached = run_all(m, {p2}, solo_config(), 16);

  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  Engine engine(*m.model, *m.tok, pool, cfg);
  std::vector<int32_t> out2;
  Request r;
  r.sampling.temperature = 0;
  r.max_tokens = 16;
  r.ignore_eos = true;
  r.prompt = p1;
  engine.submit(r, nullptr);
  while (engine.has_work()) engine.step();
  const auto before = engine.stats();
  r.prompt = p2;
  engine.submit(r, [&](const SeqEvent& ev) {
    if (ev.token >= 0) out2.push_back(ev.token);
  });
  while (engine.has_work()) engine.step();
  const auto after = engine.stats();
  const uint64_t full_blocks = shared.size() / 16;  // only whole blocks are shared
  const uint64_t computed = after.prompt_tokens_computed - before.prompt_tokens_computed;
  EXPECT_EQ(after.cached_prompt_tokens - before.cached_prompt_tokens, full_blocks * 16);
  EXPECT_EQ(computed, p2.size() - full_blocks * 16);
  EXPECT_EQ(out2, uncached[0]);
  EXPECT_GT(after.blocks.prefix_hits, 0u);
}

// A burst of requests with one system prompt, all submitted at once: the
// first computes the shared blocks, the others wait for them and take them
// from the prefix cache (scheduler.h); every output equals the request alone.
TEST(EnginePrefixCache, BurstWithSharedPrefixComputesItOnce) {
  Loaded m = load("stories260K.gguf");
  const std::vector<int32_t> shared = shared_story_prefix(*m.tok);
  ASSERT_GT(shared.size(), 40u);
  const char* tails[] = {" One day", " The dog", " Her mom said", " It was windy", " Tom came"};
  std::vector<std::vector<int32_t>> prompts;
  for (const char* t : tails) {
    prompts.push_back(shared);
    for (int32_t id : m.tok->encode(t, false)) prompts.back().push_back(id);
  }
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) solo.push_back(run_all(m, {p}, solo_config(), 12)[0]);

  EngineConfig cfg;
  cfg.num_blocks = 64;
  EngineStats st;
  auto together = run_all(m, prompts, cfg, 12, &st);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i], solo[i]) << "request " << i;
  const uint64_t full = shared.size() / 16 * 16;  // whole blocks only
  uint64_t total = 0;
  for (const auto& p : prompts) total += p.size();
  EXPECT_EQ(st.cached_prompt_tokens, full * (prompts.size() - 1));
  EXPECT_EQ(st.prompt_tokens_computed, total - full * (prompts.size() - 1));
}

TEST(EngineSampling, NGreaterThanOneSharesPromptBlocks) {
  Loaded m = load("stories260K.gguf");
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.prefix_caching = false;
  Engine engine(*m.model, *m.tok, pool, cfg);
  Request r;
  r.prompt =
      m.tok->encode("Once upon a time, there was a little girl named Lily. She loved to play");
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  ASSERT_GT(n_prompt % 16, 0);  // the last prompt block is partial: copy-on-write
  r.n = 4;
  r.max_tokens = 6;
  r.ignore_eos = true;
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0;
  r.sampling.seed = 5;
  std::map<int, std::vector<int32_t>> outs;
  engine.submit(r, [&](const SeqEvent& ev) {
    if (ev.token >= 0) outs[ev.index].push_back(ev.token);
  });
  engine.step();  // prefill + first sample of all 4
  const int64_t prompt_blocks = (n_prompt + 15) / 16;
  // All four share the prompt's blocks.
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), prompt_blocks);
  engine.step();  // each writes its first token: the shared partial block is copied 3 times
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), prompt_blocks + 3);
  while (engine.has_work()) engine.step();
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0);
  ASSERT_EQ(outs.size(), 4u);
  for (auto& [i, o] : outs) EXPECT_EQ(o.size(), 6u);
  // Index 0 uses the request's seed: it equals an n = 1 run with that seed.
  Request solo = r;
  solo.n = 1;
  std::vector<int32_t> one;
  Engine e2(*m.model, *m.tok, pool, cfg);
  e2.submit(solo, [&](const SeqEvent& ev) {
    if (ev.token >= 0) one.push_back(ev.token);
  });
  while (e2.has_work()) e2.step();
  EXPECT_EQ(outs[0], one);
}

// Draws on the thread pool (one sequence per task) give the events that draws
// on the engine thread give: tokens, log-probabilities, text and finish
// reasons, for greedy and random sampling with penalties, n > 1 and stops.
TEST(EngineSampling, DrawsOnThePoolEqualDrawsOnTheEngineThread) {
  Loaded m = load("stories260K.gguf");
  auto prompts = make_prompts(*m.tok, 12);
  auto run = [&](int64_t parallel_from) {
    ThreadPool pool(3);
    EngineConfig cfg;
    cfg.num_blocks = 128;
    cfg.parallel_sampling_logits = parallel_from;
    Engine engine(*m.model, *m.tok, pool, cfg);
    std::vector<std::string> log;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r;
      r.prompt = prompts[i];
      r.max_tokens = 12;
      r.sampling.temperature = i % 3 == 0 ? 0.0f : 0.9f;
      r.sampling.top_k = i % 2 ? 0 : 20;
      r.sampling.repetition_penalty = i % 4 == 1 ? 1.3f : 1.0f;
      r.sampling.frequency_penalty = i % 5 == 2 ? 0.5f : 0.0f;
      r.sampling.seed = 100 + i;
      r.logprobs = i % 2 ? 3 : -1;
      r.n = i % 6 == 4 ? 3 : 1;
      if (i == 7) r.stop = {"the"};
      engine.submit(r, [&log](const SeqEvent& ev) {
        std::string line = fmt::format("{}/{} {} '{}' {} {}", ev.request_id, ev.index, ev.token,
                                       ev.text, std::string(finish_reason_name(ev.finish_reason)), ev.error);
        if (ev.has_logprob) {
          line += fmt::format(" {}", ev.logprob);
          for (const auto& t : ev.top_logprobs) line += fmt::format(" {}:{}", t.token, t.logprob);
        }
        log.push_back(line);
      });
    }
    while (engine.has_work()) engine.step();
    EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0);
    return log;
  };
  const auto on_pool = run(0);
  const auto on_engine = run(std::numeric_limits<int64_t>::max());
  EXPECT_GT(on_pool.size(), prompts.size() * 5);
  EXPECT_EQ(on_pool, on_engine);
}

TEST(EngineStops, StopStringEndsAndIsCut) {
  Loaded m = load("stories260K.gguf");
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  // Reference: the greedy text without a stop.
  auto ref_ids = run_all(m, {m.tok->encode("Once upon a time")}, solo_config(), 40)[0];
  std::string ref = m.tok->decode(ref_ids);
  // A stop string taken from the middle of the reference text: the output must
  // end right before its first occurrence.
  ASSERT_GT(ref.size(), 40u) << ref;
  const std::string stop = ref.substr(ref.size() / 2, 4);
  const size_t at = ref.find(stop);
  Engine engine(*m.model, *m.tok, pool, cfg);
  Request r;
  r.prompt = m.tok->encode("Once upon a time");
  r.sampling.temperature = 0;
  r.max_tokens = 40;
  r.stop = {stop, "never-there"};
  std::string text, reason;
  engine.submit(r, [&](const SeqEvent& ev) {
    text += ev.text;
    if (ev.finished) reason = finish_reason_name(ev.finish_reason);
  });
  while (engine.has_work()) engine.step();
  EXPECT_EQ(reason, "stop");
  EXPECT_EQ(text, ref.substr(0, at));
}

TEST(EngineAbort, FreesBlocksAtOnce) {
  Loaded m = load("stories260K.gguf");
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  Engine engine(*m.model, *m.tok, pool, cfg);
  Request r;
  r.prompt = m.tok->encode("Once upon a time");
  r.max_tokens = 100;
  r.ignore_eos = true;
  std::string reason;
  uint64_t id = engine.submit(r, [&](const SeqEvent& ev) {
    if (ev.finished) reason = finish_reason_name(ev.finish_reason);
  });
  engine.step();
  engine.step();
  EXPECT_GT(engine.kv_manager().allocator().num_used(), 0);
  engine.abort(id);
  EXPECT_EQ(reason, "abort");
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0);
  EXPECT_FALSE(engine.has_work());
}

TEST(EngineErrors, BadRequests) {
  Loaded m = load("stories260K.gguf");
  ThreadPool pool(1);
  EngineConfig cfg;
  cfg.num_blocks = 8;
  Engine engine(*m.model, *m.tok, pool, cfg);
  Request r;
  EXPECT_THROW(engine.submit(r, nullptr), ConfigError);  // empty
  r.prompt = {1, 5000};
  EXPECT_THROW(engine.submit(r, nullptr), ConfigError);  // out of vocab
  r.prompt.assign(200, 5);
  EXPECT_THROW(engine.submit(r, nullptr), ConfigError);  // over the 128-token cache
  r.prompt.assign(600, 5);
  EXPECT_THROW(engine.submit(r, nullptr), ConfigError);  // over the context (512)
  r.prompt = {1, 5};
  r.sampling.temperature = -1;
  EXPECT_THROW(engine.submit(r, nullptr), ConfigError);
  EXPECT_FALSE(engine.has_work());
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0);
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

TEST(EngineSwapGuard, LowMemoryHoldsNewRequestsBack) {
  Loaded m = load("stories260K.gguf");
  ThreadPool pool(1);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  bool memory_ok = false;
  cfg.memory_ok = [&] { return memory_ok; };
  cfg.memory_check_ms = 0;
  Engine engine(*m.model, *m.tok, pool, cfg);
  Request r;
  r.prompt = m.tok->encode("Once upon a time");
  r.max_tokens = 4;
  int tokens = 0;
  engine.submit(r, [&](const SeqEvent& ev) { tokens += ev.token >= 0; });
  EXPECT_FALSE(engine.step());  // nothing admitted
  EXPECT_TRUE(engine.stats().admission_paused);
  EXPECT_EQ(engine.stats().admission_pauses, 1u);
  EXPECT_EQ(tokens, 0);
  memory_ok = true;
  while (engine.has_work()) engine.step();
  EXPECT_EQ(tokens, 4);
  EXPECT_FALSE(engine.stats().admission_paused);
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

// The engine's finish reasons reach clients by these names (OpenAI's
// "stop"/"length", and ours for aborted and failed requests).
TEST(FinishReasons, ApiNames) {
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::kAbort), "abort");
  EXPECT_STREQ(finish_reason_name(FinishReason::kError), "error");
  EXPECT_STREQ(finish_reason_name(FinishReason::kNone), "");
  EXPECT_EQ(SeqEvent{}.finish_reason, FinishReason::kNone);
}

}  // namespace
}  // namespace pagellm
