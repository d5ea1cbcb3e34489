// Speculative decoding: prompt lookup against a naive search, the adaptive
// draft length, and the product guarantee: with speculation the engine emits
// exactly the tokens it emits without, greedy or sampled, alone, batched,
// chunked and preempted, and every block comes back.
#include "engine/speculation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "engine/draft_model.h"
#include "engine/engine_runner.h"
#include "util/error.h"
#include "util/fault_injector.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

// What followed an earlier occurrence of the longest n-gram ending `t` whose
// match reaches furthest back (at most kLookupContext tokens), the latest of
// those, written as directly as possible.
std::vector<int32_t> naive_lookup(const std::vector<int32_t>& t, int max_n, int k) {
  const int size = static_cast<int>(t.size());
  const int min_n = max_n == 1 ? 1 : 2;
  for (int n = max_n; n >= min_n; --n) {
    if (n > size - 1) continue;
    int best = -1, best_len = -1;
    for (int start = 0; start + n < size; ++start) {
      // How many tokens before and including t[start + n - 1] equal those
      // ending t (capped).
      int len = 0;
      while (start + n - 1 - len >= 0 && t[start + n - 1 - len] == t[size - 1 - len] &&
             len < std::max<int>(n, kLookupContext))
        ++len;
      if (len < n) continue;
      len = std::min<int>(len, std::max<int>(n, kLookupContext));
      if (len >= best_len) {
        best = start;
        best_len = len;
      }
    }
    if (best >= 0) {
      std::vector<int32_t> out;
      for (int i = best + n; i < size && static_cast<int>(out.size()) < k; ++i) out.push_back(t[i]);
      return out;
    }
  }
  return {};
}

TEST(PromptLookup, EqualsNaiveSearch) {
  std::mt19937 rng(7);
  std::vector<int32_t> out;
  int found = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const int size = std::uniform_int_distribution<int>(0, 40)(rng);
    const int alphabet = std::uniform_int_distribution<int>(2, 6)(rng);
    std::vector<int32_t> t(static_cast<size_t>(size));
    for (auto& x : t) x = std::uniform_int_distribution<int>(0, alphabet - 1)(rng);
    if (iter % 4 == 0 && size > 0) {
      // Text that quotes itself at length, with edits: matches that reach
      // past kLookupContext tokens back, and several copies to choose from.
      for (int quotes = std::uniform_int_distribution<int>(1, 5)(rng); quotes > 0; --quotes) {
        const auto from = std::uniform_int_distribution<size_t>(0, t.size() - 1)(rng);
        const auto len = std::uniform_int_distribution<size_t>(1, 150)(rng);
        for (size_t i = from; i < std::min(t.size(), from + len); ++i)
          t.push_back(std::uniform_int_distribution<int>(0, 30)(rng) == 0 ? alphabet : t[i]);
      }
    }
    const int max_n = std::uniform_int_distribution<int>(0, 5)(rng);
    const int k = std::uniform_int_distribution<int>(0, 6)(rng);
    const auto want = max_n > 0 && k > 0 ? naive_lookup(t, max_n, k) : std::vector<int32_t>{};
    const int32_t got = lookup_ngram(t, max_n, k, out);
    ASSERT_EQ(out, want) << "iter " << iter;
    ASSERT_EQ(got, static_cast<int32_t>(want.size()));
    found += !want.empty();
  }
  EXPECT_GT(found, 5000);  // the search found something often enough to mean something
}

TEST(PromptLookup, ProposesWhatFollowedTheLastOccurrence) {
  std::vector<int32_t> out;
  // "a b c d | a b c e | a b" -> the latest "a b" was followed by "c e".
  EXPECT_EQ(lookup_ngram({{1, 2, 3, 4, 1, 2, 3, 5, 1, 2}}, 3, 4, out), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 5, 1, 2}));
  // Longer n-grams win over more recent shorter ones.
  EXPECT_EQ(lookup_ngram({{7, 1, 2, 9, 3, 1, 2, 8, 7, 1, 2}}, 3, 1, out), 1);
  EXPECT_EQ(out, (std::vector<int32_t>{9}));
  EXPECT_EQ(lookup_ngram({{1, 2, 3}}, 3, 4, out), 0);
  EXPECT_TRUE(out.empty());
}

// The acceptance estimate against the same counts kept by hand: (a + 1) /
// (a + r + 2) with a and r decaying by kDecay every step.
TEST(SpecControl, AcceptanceFollowsRecentDrafts) {
  SpecControl c(8);
  double a = 0, r = 0;
  std::mt19937 rng(5);
  std::vector<int32_t> tokens = {1, 2, 3};
  for (int step = 0; step < 200; ++step) {
    EXPECT_EQ(c.next(), 8);  // no cooldown without a draft model
    a *= SpecControl::kDecay;
    r *= SpecControl::kDecay;
    const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
    if (kind == 0) {  // a verified draft
      const int proposed = std::uniform_int_distribution<int>(1, 8)(rng);
      const int accepted = std::uniform_int_distribution<int>(0, proposed)(rng);
      c.record(proposed, accepted);
      a += accepted;
      r += accepted < proposed;
    } else if (kind == 1) {  // a shadow, then the token the sequence emits
      const int32_t guess = std::uniform_int_distribution<int>(0, 1)(rng);
      c.shadow(static_cast<int64_t>(tokens.size()), guess);
      c.observe(tokens);  // not emitted yet: nothing to compare
      tokens.push_back(std::uniform_int_distribution<int>(0, 1)(rng));
      c.observe(tokens);
      c.observe(tokens);  // compared once
      a += tokens.back() == guess;
      r += tokens.back() != guess;
    }  // else no draft this step
    ASSERT_NEAR(c.acceptance(), (a + 1) / (a + r + 2), 1e-12) << "step " << step;
  }
}

TEST(SpecControl, RecoversWithoutDrafts) {
  SpecControl c(4);
  for (int i = 0; i < 10; ++i) {
    c.next();
    c.record(4, 0);
  }
  const double low = c.acceptance();
  EXPECT_LT(low, 0.15);
  // Steps without drafts: the estimate returns towards 1/2, so drafting is tried again.
  for (int i = 0; i < 40; ++i) c.next();
  EXPECT_GT(c.acceptance(), 0.45);
  EXPECT_LE(c.acceptance(), 0.5);
}

// A draft model's drafts cost passes: after two fully rejected drafts in a
// row it stops proposing for 1, 2, 4, ... steps, reset by an accepted draft.
TEST(SpecControl, DraftModelBacksOff) {
  SpecControl c(5, /*cooldown=*/true);
  EXPECT_EQ(c.next(), 5);
  c.record(5, 2);
  EXPECT_EQ(c.next(), 5);
  int cooldown_before = 0;
  for (int round = 0; round < 4; ++round) {
    c.record(1, 0);
    EXPECT_GT(c.next(), 0);
    c.record(1, 0);
    int skipped = 0;
    while (c.next() == 0) ++skipped;
    EXPECT_EQ(skipped, 1 << round);
    EXPECT_GT(skipped, cooldown_before);
    cooldown_before = skipped;
  }
  c.record(1, 1);  // an accepted draft resets the backoff
  c.record(1, 0);
  c.record(1, 0);
  int skipped = 0;
  while (c.next() == 0) ++skipped;
  EXPECT_EQ(skipped, 1);
}

struct SpecRun {
  std::vector<std::vector<int32_t>> tokens;
  EngineStats stats;
};

// Prompts that quote themselves, so that prompt lookup has something to find.
std::vector<std::vector<int32_t>> repeating_prompts(const Tokenizer& tok, int n) {
  auto base = make_prompts(tok, n);
  for (auto& p : base) {
    const std::vector<int32_t> copy = p;
    p.insert(p.end(), copy.begin() + 1, copy.end());
  }
  return base;
}

// Draft lengths follow measured step times, which a loaded machine (CI)
// varies: the tests fix them (each extra row a tenth of a one-row step), so
// that how much gets drafted is the same on every run.
void steady_step_costs(Engine& engine) {
  engine.set_step_seconds([](int64_t rows) { return 1.0 + 0.1 * static_cast<double>(rows - 1); });
}

// Request i samples with seed 1000 + first_seed + i.
// With `draft_file`, a draft model proposes instead of prompt lookup.
SpecRun run_spec(Loaded& m, const std::vector<std::vector<int32_t>>& prompts, EngineConfig cfg,
                 int gen, float temperature, int32_t ngram, uint64_t first_seed = 0,
                 const std::string& draft_file = {}) {
  cfg.speculation.ngram = ngram;
  cfg.speculation.draft_max = 4;
  cfg.speculation.max_batch = 64;  // drafts in batches too, to test them there
  cfg.speculation.draft_model = !draft_file.empty();
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  steady_step_costs(engine);
  DraftModelProposer* drafter = nullptr;
  if (!draft_file.empty()) {
    DraftModelConfig dc;
    dc.num_blocks = 40;  // room for a few sequences: the rest are evicted and caught up again
    dc.max_batched_tokens = 64;
    dc.max_seqs = 64;
    auto p = std::make_unique<DraftModelProposer>(ModelRunner::load(test::data_path(draft_file)),
                                                  pool, dc, m.tok->n_vocab());
    drafter = p.get();
    engine.set_draft_proposer(std::move(p));
  }
  Outputs outs;
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.sampling.temperature = temperature;
    r.sampling.seed = 1000 + first_seed + i;
    r.max_tokens = gen;
    r.ignore_eos = true;
    ids.push_back(engine.submit(r, [&outs](const SeqEvent& ev) {
      if (ev.token >= 0) outs[ev.request_id].push_back(ev.token);
    }));
  }
  while (engine.has_work()) engine.step();
  EXPECT_EQ(engine.kv_manager().num_used_all(), 0) << "leaked blocks";
  if (drafter) {
    EXPECT_EQ(drafter->blocks_in_use(), 0) << "the draft model leaked blocks";
  }
  SpecRun res;
  res.stats = engine.stats();
  for (uint64_t id : ids) res.tokens.push_back(outs[id]);
  return res;
}

void check_same_tokens(const std::string& model_file, float temperature,
                       const std::string& draft_file = {}) {
  const int32_t ngram = draft_file.empty() ? 3 : 0;
  Loaded m = load(model_file);
  const auto prompts = repeating_prompts(*m.tok, 12);
  const int gen = 40;
  std::vector<std::vector<int32_t>> plain;
  for (size_t i = 0; i < prompts.size(); ++i)
    plain.push_back(run_spec(m, {prompts[i]}, solo_config(), gen, temperature, 0, i).tokens[0]);

  uint64_t proposed = 0, accepted = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = run_spec(m, {prompts[i]}, solo_config(), gen, temperature, ngram, i, draft_file);
    EXPECT_EQ(r.tokens[0], plain[i]) << "alone, request " << i;
    proposed += r.stats.spec_proposed;
    accepted += r.stats.spec_accepted;
  }
  EXPECT_GT(proposed, 0u);
  EXPECT_GT(accepted, 0u);

  EngineConfig batched;
  batched.num_blocks = 256;
  batched.scheduler.max_num_seqs = 16;
  batched.scheduler.max_batched_tokens = 300;
  auto together = run_spec(m, prompts, batched, gen, temperature, ngram, 0, draft_file);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(together.tokens[i], plain[i]) << "batched, request " << i;
  EXPECT_GT(together.stats.spec_proposed, 0u);
  // Drafts that mostly fail are cut (their rows cost more than they save),
  // so accepted ones in the batch are certain only where they mostly pass.
  if (2 * accepted > proposed) {
    EXPECT_GT(together.stats.spec_accepted, 0u);
  }

  // Small chunks: drafts compete with prefill chunks for the budget.
  batched.scheduler.max_batched_tokens = 9;
  auto chunked = run_spec(m, prompts, batched, gen, temperature, ngram, 0, draft_file);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(chunked.tokens[i], plain[i]) << "chunked, request " << i;

  // A cache too small for all of them: preemption while drafts hold blocks.
  EngineConfig tight = batched;
  tight.num_blocks = 14;
  tight.scheduler.max_batched_tokens = 64;
  auto preempted = run_spec(m, prompts, tight, gen, temperature, ngram, 0, draft_file);
  EXPECT_GT(preempted.stats.preemptions, 0u);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(preempted.tokens[i], plain[i]) << "preempted, request " << i;
  std::printf("%s (temperature %.1f): alone %llu of %llu drafts accepted; batched %llu of %llu; "
              "preempted %llu times\n",
              model_file.c_str(), temperature, static_cast<unsigned long long>(accepted),
              static_cast<unsigned long long>(proposed),
              static_cast<unsigned long long>(together.stats.spec_accepted),
              static_cast<unsigned long long>(together.stats.spec_proposed),
              static_cast<unsigned long long>(preempted.stats.preemptions));
}

TEST(Speculation, GreedyTokensUnchangedStories260K) { check_same_tokens("stories260K.gguf", 0); }
TEST(Speculation, GreedyTokensUnchangedRandomQ4_0) {
  check_same_tokens("golden/random/rand-llama-tok512-Q4_0.gguf", 0);
}
TEST(Speculation, GreedyTokensUnchangedRandomQwen2) {
  check_same_tokens("golden/random/rand-qwen2-tok512-Q8_0.gguf", 0);
}
TEST(Speculation, GreedyTokensUnchangedGemma2Windows) {
  check_same_tokens("golden/arch/rand-gemma2-tok512-Q8_0.gguf", 0);
}
TEST(Speculation, GreedyTokensUnchangedMixtral) {
  check_same_tokens("golden/arch/rand-mixtral-tok512-Q8_0.gguf", 0);
}
// Sampled tokens too: each draw uses the logits, history and generator state
// that decoding without drafts would.
TEST(Speculation, SampledTokensUnchangedStories260K) { check_same_tokens("stories260K.gguf", 0.8f); }

// A draft model: the same weights quantized (a high acceptance), and a
// model of the same vocabulary with other weights (a low one).
TEST(Speculation, DraftModelGreedyTokensUnchanged) {
  check_same_tokens("golden/random/rand-llama-tok512-F32.gguf", 0,
                    "golden/random/rand-llama-tok512-Q4_0.gguf");
}
TEST(Speculation, DraftModelOfOtherWeightsTokensUnchanged) {
  check_same_tokens("golden/random/rand-llama-tok512-Q8_0.gguf", 0,
                    "golden/random/rand-qwen2-tok512-Q8_0.gguf");
}
TEST(Speculation, DraftModelSampledTokensUnchanged) {
  check_same_tokens("stories260K.gguf", 0.8f, "stories260K.gguf");
}

TEST(Speculation, DraftModelWithAnotherVocabularyIsRefused) {
  Loaded m = load("stories260K.gguf");
  ThreadPool pool(1);
  DraftModelConfig dc;
  dc.num_blocks = 8;
  try {
    DraftModelProposer p(ModelRunner::load(test::data_path("golden/random/rand-llama-spm32k-Q4_0.gguf")),
                         pool, dc, m.tok->n_vocab());
    FAIL() << "a draft model of another vocabulary was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("must share the model's vocabulary"), std::string::npos)
        << e.what();
  }
}

// n > 1: the samples fork at the end of the prompt (sharing its blocks,
// copy-on-write) and each drafts and verifies on its own.
TEST(Speculation, SamplesOfOneRequestUnchanged) {
  Loaded m = load("stories260K.gguf");
  const auto prompts = repeating_prompts(*m.tok, 3);
  auto run = [&](int32_t ngram) {
    EngineConfig cfg;
    cfg.num_blocks = 128;
    cfg.scheduler.max_num_seqs = 16;
    cfg.speculation.ngram = ngram;
    cfg.speculation.draft_max = 4;
    cfg.speculation.max_batch = 16;
    ThreadPool pool(2);
    Engine engine(*m.model, *m.tok, pool, cfg);
    steady_step_costs(engine);
    std::map<std::pair<uint64_t, int32_t>, std::vector<int32_t>> outs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r;
      r.prompt = prompts[i];
      r.n = 4;
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 50 + i;
      r.max_tokens = 30;
      r.ignore_eos = true;
      engine.submit(r, [&outs](const SeqEvent& ev) {
        if (ev.token >= 0) outs[{ev.request_id, ev.index}].push_back(ev.token);
      });
    }
    while (engine.has_work()) engine.step();
    EXPECT_EQ(engine.kv_manager().num_used_all(), 0);
    EXPECT_EQ(outs.size(), prompts.size() * 4);
    return std::make_pair(outs, engine.stats());
  };
  const auto [plain, st0] = run(0);
  const auto [spec, st1] = run(3);
  EXPECT_EQ(spec, plain);
  EXPECT_GT(st1.spec_accepted, 0u);
}

// A proposer that knows each sequence's greedy output (`full`: prompt and
// output) and drafts it wrongly before position switch_at[i], rightly after.
class ScriptedProposer final : public DraftProposer {
 public:
  ScriptedProposer(std::vector<std::vector<int32_t>> full, std::vector<size_t> switch_at,
                   int32_t n_vocab)
      : full_(std::move(full)), switch_at_(std::move(switch_at)), n_vocab_(n_vocab) {}
  void propose(std::span<const DraftWant> wants) override {
    for (const DraftWant& w : wants) {
      w.out->clear();
      const size_t n = w.tokens.size();
      size_t f = 0;
      while (f < full_.size() && !(full_[f].size() >= n &&
                                   std::equal(w.tokens.begin(), w.tokens.end(), full_[f].begin())))
        ++f;
      if (w.k <= 0 || f == full_.size()) continue;
      const bool wrong = n < switch_at_[f];
      (wrong ? wrong_calls : right_calls)++;
      for (size_t i = n; i < n + static_cast<size_t>(w.k) && i < full_[f].size(); ++i)
        w.out->push_back(wrong ? (full_[f][i] + 1) % n_vocab_ : full_[f][i]);
    }
  }
  int wrong_calls = 0, right_calls = 0;

 private:
  std::vector<std::vector<int32_t>> full_;
  std::vector<size_t> switch_at_;
  int32_t n_vocab_;
};

// Drafts ride in the step that decodes the other sequences: every step is
// one forward pass whose rows are each decoding sequence's token and the
// drafts granted (no extra pass for verification, nothing computed twice).
TEST(Speculation, DraftsRideInTheDecodeStep) {
  Loaded m = load("stories260K.gguf");
  const auto prompts = repeating_prompts(*m.tok, 3);
  const int gen = 40;
  std::vector<std::vector<int32_t>> full;
  for (size_t i = 0; i < prompts.size(); ++i) {
    full.push_back(prompts[i]);
    const auto out = run_spec(m, {prompts[i]}, solo_config(), gen, 0, 0).tokens[0];
    full.back().insert(full.back().end(), out.begin(), out.end());
  }
  EngineConfig cfg;
  cfg.num_blocks = 128;
  cfg.scheduler.max_num_seqs = 8;
  cfg.speculation = {.draft_model = true, .draft_max = 4, .max_batch = 8};
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  steady_step_costs(engine);
  // Drafts of the greedy output: accepted, so every step has some.
  engine.set_draft_proposer(std::make_unique<ScriptedProposer>(
      full, std::vector<size_t>(full.size(), 0), m.tok->n_vocab()));
  for (const auto& prompt : prompts) {
    Request r;
    r.prompt = prompt;
    r.max_tokens = gen;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    engine.submit(r, nullptr);
  }
  int shared_steps = 0;
  while (engine.has_work()) {
    const EngineStats before = engine.stats();
    // Every running sequence decoding (its last token is all it has to run).
    int decoding = 0;
    for (const SequenceStats& q : before.sequences)
      decoding += q.running && q.n_tokens > q.n_prompt && q.n_computed + 1 == q.n_tokens;
    const bool all_decoding = decoding == before.running && before.waiting == 0;
    ASSERT_TRUE(engine.step());
    const EngineStats after = engine.stats();
    ASSERT_EQ(after.steps, before.steps + 1);  // one forward pass
    if (!all_decoding) continue;
    const uint64_t drafts = after.spec_proposed - before.spec_proposed;
    EXPECT_EQ(after.tokens_computed - before.tokens_computed, static_cast<uint64_t>(decoding) + drafts);
    shared_steps += drafts > 0 && decoding > 1;
  }
  EXPECT_GE(shared_steps, 4) << "too few steps verified drafts beside other sequences' decode";
}

TEST(Speculation, BacksOffWhileRejectedAndRecovers) {
  Loaded m = load("stories260K.gguf");
  const auto prompt = repeating_prompts(*m.tok, 1)[0];
  const int gen = 90, wrong_for = 30;
  const auto plain = run_spec(m, {prompt}, solo_config(), gen, 0, 0).tokens[0];
  std::vector<int32_t> full = prompt;
  full.insert(full.end(), plain.begin(), plain.end());

  EngineConfig cfg = solo_config();
  cfg.speculation = {.draft_model = true, .draft_max = 4, .max_batch = 4};
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  steady_step_costs(engine);
  auto owned = std::make_unique<ScriptedProposer>(std::vector<std::vector<int32_t>>{full},
                                                  std::vector{prompt.size() + wrong_for},
                                                  m.tok->n_vocab());
  ScriptedProposer* proposer = owned.get();
  engine.set_draft_proposer(std::move(owned));
  std::vector<int32_t> out;
  Request r;
  r.prompt = prompt;
  r.max_tokens = gen;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  engine.submit(r, [&out](const SeqEvent& ev) {
    if (ev.token >= 0) out.push_back(ev.token);
  });
  while (engine.has_work()) engine.step();
  EXPECT_EQ(out, plain);
  // Every wrong draft is rejected, so the first 30 tokens take a step each:
  // the backoff (1, 2, 4, 8 ... steps after two misses) drafts in few of them.
  EXPECT_LT(proposer->wrong_calls, wrong_for / 2);
  EXPECT_GT(proposer->wrong_calls, 2);
  // Then drafts return and are accepted.
  EXPECT_GT(proposer->right_calls, 0);
  EXPECT_GT(engine.stats().spec_accepted, static_cast<uint64_t>(gen - wrong_for) / 3);
}

TEST(Speculation, FaultWhileVerifyingLosesNothing) {
  Loaded m = load("golden/random/rand-llama-tok512-Q4_0.gguf");
  const auto prompts = repeating_prompts(*m.tok, 6);
  EngineConfig cfg;
  cfg.num_blocks = 128;
  cfg.scheduler.max_num_seqs = 8;
  auto plain = run_spec(m, prompts, cfg, 30, 0, 0);
  FaultScope faults;
  FaultInjector::arm("engine.verify", {.skip = 2, .times = 5});
  auto faulty = run_spec(m, prompts, cfg, 30, 0, 3);
  EXPECT_EQ(FaultInjector::fired("engine.verify"), 5);
  EXPECT_GT(faulty.stats.spec_accepted, 0u);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(faulty.tokens[i], plain.tokens[i]) << "request " << i;
}

// Chi-square statistic of `counts` against probabilities `p` (bins with an
// expected count under 5 merged into one), and its degrees of freedom.
std::pair<double, int> chi_square(const std::map<int32_t, int>& counts, const std::vector<double>& p,
                                  int n) {
  double stat = 0, rest_expected = 0, rest_seen = 0;
  int bins = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    const double expected = p[t] * n;
    const auto it = counts.find(static_cast<int32_t>(t));
    const double seen = it == counts.end() ? 0 : it->second;
    if (expected < 5) {
      rest_expected += expected;
      rest_seen += seen;
      continue;
    }
    stat += (seen - expected) * (seen - expected) / expected;
    ++bins;
  }
  if (rest_expected > 0) {
    stat += (rest_seen - rest_expected) * (rest_seen - rest_expected) / rest_expected;
    ++bins;
  }
  return {stat, bins - 1};
}

// The chi-square quantile at 1 - 1e-4 (Wilson-Hilferty).
double chi_square_critical(int df) {
  const double z = 3.719, k = df;
  const double c = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * c * c * c;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((logits[i] - mx) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

// With temperature, a token drawn from a verification row follows the
// model's distribution: over many seeds, the third token (drawn from the row
// after a drafted second token, when the first two are the likely ones)
// against softmax(logits) of that context, by chi-square.
TEST(Speculation, SampledTokensFollowTheModelsDistribution) {
  Loaded m = load("stories260K.gguf");
  const auto prompt = m.tok->encode(
      "Once upon a time, there was a little girl named Lily. One day, she went to the park. "
      "Once upon a");
  const int N = 8000;
  const double temp = 1.0;
  EngineConfig cfg;
  cfg.num_blocks = 64 * 6;
  cfg.scheduler.max_num_seqs = 64;
  cfg.speculation.ngram = 3;
  cfg.speculation.draft_max = 3;
  cfg.speculation.max_batch = 64;
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  steady_step_costs(engine);
  std::map<uint64_t, std::vector<int32_t>> outs;
  for (int i = 0; i < N; ++i) {
    Request r;
    r.prompt = prompt;
    r.sampling = {.temperature = static_cast<float>(temp), .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                  .seed = static_cast<uint64_t>(i) * 104729 + 11};
    r.max_tokens = 3;
    r.ignore_eos = true;
    engine.submit(r, [&outs](const SeqEvent& ev) {
      if (ev.token >= 0) outs[ev.request_id].push_back(ev.token);
    });
  }
  while (engine.has_work()) engine.step();
  ASSERT_GT(engine.stats().spec_accepted, 0u);
  // The first token whose drafted follower was drawn most often: the
  // third token of those samples came from a verification row.
  std::map<int32_t, int> took_draft;
  std::map<int32_t, int32_t> draft_after;
  std::vector<int32_t> context, draft;
  for (auto& [id, t] : outs) {
    if (!draft_after.count(t[0])) {
      context = prompt;
      context.push_back(t[0]);
      draft_after[t[0]] = lookup_ngram(context, 3, 1, draft) > 0 ? draft[0] : -1;
    }
    if (t[1] == draft_after[t[0]]) ++took_draft[t[0]];
  }
  ASSERT_FALSE(took_draft.empty());
  const int32_t g0 = std::max_element(took_draft.begin(), took_draft.end(), [](auto& a, auto& b) {
                       return a.second < b.second;
                     })->first;
  context = prompt;
  context.push_back(g0);
  context.push_back(draft_after[g0]);
  std::map<int32_t, int> third;
  int n = 0;
  for (auto& [id, t] : outs)
    if (t[0] == g0 && t[1] == draft_after[g0]) {
      ++third[t[2]];
      ++n;
    }
  ASSERT_GT(n, 400) << "too few samples took the drafted path";

  // The model's distribution there, from a plain run's prompt logits.
  std::vector<float> logits;
  {
    EngineConfig plain;
    plain.num_blocks = 16;
    plain.scheduler.max_num_seqs = 1;
    Engine e(*m.model, *m.tok, pool, plain);
    Request r;
    r.prompt = context;
    r.max_tokens = 1;
    r.prompt_logits = true;
    e.submit(r, [&logits](const SeqEvent& ev) {
      if (!ev.prompt_logits.empty()) logits = ev.prompt_logits;
    });
    while (e.has_work()) e.step();
  }
  ASSERT_EQ(logits.size(), static_cast<size_t>(m.tok->n_vocab()));
  const auto [stat, df] = chi_square(third, softmax(logits, temp), n);
  std::printf("%d of %d samples drew the third token from a verification row: chi-square %.1f, "
              "%d degrees of freedom, critical value %.1f\n",
              n, N, stat, df, chi_square_critical(df));
  ASSERT_GT(df, 1);
  EXPECT_LT(stat, chi_square_critical(df));
  // The test can tell distributions apart: the same counts against a colder model fail it.
  const auto [cold, cold_df] = chi_square(third, softmax(logits, temp * 0.7), n);
  EXPECT_GT(cold, chi_square_critical(cold_df));
}

}  // namespace
}  // namespace pagellm
