// deepseek2 files written by make-model (the softmax golden is
// golden_arch2026_test's): the keys read back as the family's rules say
// (MLA dims, score scale mscale^2 / sqrt(q/k head) computed here from the
// keys, a dense layer 0, the router as written), sigmoid routing loads its
// selection bias on the expert layers only and runs, make-model refuses MLA
// shapes it cannot write, and prompt positions run MLA's plain form (decoded
// ones the absorbed form) with the same bits alone, chunked, batched with
// decoding sequences and recomputed after a preemption.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gguf/gguf_reader.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"
#include "model/make_model.h"
#include "model/model_test_util.h"
#include "model/runner.h"
#include "support/test_support.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace pagellm {
namespace {

using test::data_path;
using test::TempPath;

MakeModelSpec spec(int32_t gating) {
  MakeModelSpec s;
  s.arch = "deepseek2";
  s.n_embd = 128;
  s.n_layer = 3;
  s.n_head = 4;
  s.n_head_kv = 1;
  s.n_ff = 128;
  s.head_dim = 64;
  s.type = DType::F32;
  s.expert_gating = gating;
  s.vocab_from = data_path("stories260K.gguf");
  return s;
}

TEST(DeepSeek2Model, KeysReadAsTheFamilySays) {
  TempPath path(".gguf");
  ThreadPool pool(2);
  make_model(spec(1), path.path, pool);
  auto f = GgufFile::open(path.path);
  const ModelHParams hp = ModelHParams::from_gguf(*f);
  EXPECT_EQ(hp.mla.kv_lora_rank, 128);  // 2 x head size
  EXPECT_EQ(hp.n_rot, 32);
  EXPECT_EQ(hp.mla.qk_nope, 32);
  EXPECT_EQ(hp.head_dim, 128 + 32);
  const double factor = *f->get_f64("deepseek2.rope.scaling.factor");
  const double mul = *f->get_f64("deepseek2.rope.scaling.yarn_log_multiplier");
  const double mscale = 1 + mul * std::log(factor);
  EXPECT_NEAR(hp.attn_scale, mscale * mscale / std::sqrt(64.0), 1e-7);
  EXPECT_EQ(hp.rope_tables[0].attn_factor, 1.0f);  // YaRN's magnitude is in the scale
  EXPECT_TRUE(hp.layers[0].dense_ffn);
  EXPECT_FALSE(hp.moe_layer(0));
  EXPECT_TRUE(hp.moe_layer(1));
  ASSERT_TRUE(hp.router.has_value());
  EXPECT_EQ(hp.router->gating, ExpertGating::kSoftmax);
  EXPECT_FALSE(hp.router->renormalize);
  EXPECT_FLOAT_EQ(hp.router->scale, 2.5f);
}

TEST(DeepSeek2Model, SigmoidRoutingLoadsItsBiasAndRuns) {
  TempPath path(".gguf");
  ThreadPool pool(2);
  make_model(spec(2), path.path, pool);
  auto m = ModelRunner::load(path.path);
  EXPECT_EQ(m->hparams().router->gating, ExpertGating::kSigmoid);
  const auto& layers = m->weights().layers;
  EXPECT_EQ(layers[0].vector(VectorRole::kExpProbsB), nullptr);
  for (size_t l = 1; l < layers.size(); ++l)
    EXPECT_NE(layers[l].vector(VectorRole::kExpProbsB), nullptr) << l;
  const std::vector<float> logits = test::prompt_logits(*m, pool);
  ASSERT_FALSE(logits.empty());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(DeepSeek2Model, MakeModelRefusesBadMlaShapes) {
  TempPath path(".gguf");
  ThreadPool pool(2);
  MakeModelSpec s = spec(1);
  s.kv_lora_rank = 48;  // not whole Q8_0 blocks
  s.type = DType::Q8_0;
  EXPECT_THROW(make_model(s, path.path, pool), ConfigError);
  s = spec(3);  // no such gating
  EXPECT_THROW(make_model(s, path.path, pool), ConfigError);
  s = spec(1);
  s.arch = "llama";
  s.kv_lora_rank = 64;  // deepseek2 only
  EXPECT_THROW(make_model(s, path.path, pool), ConfigError);
}

// Two sequences' fixed token ids, their prompt ends, and a schedule of
// steps, each a list of (sequence, first position, end position). Returns
// the logits of every position run, by (sequence, position). prompt_ends
// false: no Batch::step_from (every position absorbed).
struct MlaSchedule {
  std::vector<std::vector<int32_t>> ids;
  std::vector<int32_t> n_prompt;
  std::vector<std::vector<std::tuple<int32_t, int32_t, int32_t>>> steps;
};
using PositionLogits = std::map<std::pair<int32_t, int32_t>, std::vector<float>>;

PositionLogits run_schedule(ModelRunner& m, ThreadPool& pool, const MlaSchedule& sc,
                            bool prompt_ends = true) {
  const int32_t bs = 16;
  BlockAllocator alloc(16);
  KvCacheStorage kv(m.kv_shape(alloc.num_blocks(), bs, DType::F32),
                    {{"host", 0, m.hparams().n_layer}});
  std::vector<BlockTable> tables;
  for (size_t s = 0; s < sc.ids.size(); ++s) tables.emplace_back(bs);
  for (size_t s = 0; s < sc.ids.size(); ++s)
    EXPECT_TRUE(tables[s].reserve(alloc, static_cast<int64_t>(sc.ids[s].size())));
  const int64_t V = m.hparams().n_vocab;
  PositionLogits out;
  for (const auto& step : sc.steps) {
    Batch b;
    std::vector<std::pair<int32_t, int32_t>> rows;
    for (const auto& [seq, p0, p1] : step) {
      const int32_t i = b.add_sequence(tables[static_cast<size_t>(seq)]);
      if (prompt_ends) b.step_from.push_back(sc.n_prompt[static_cast<size_t>(seq)]);
      for (int32_t p = p0; p < p1; ++p) {
        b.add_token(i, sc.ids[static_cast<size_t>(seq)][static_cast<size_t>(p)], p, true);
        rows.emplace_back(seq, p);
      }
    }
    std::vector<float> logits;
    m.forward(b, kv, pool, logits);
    for (size_t r = 0; r < rows.size(); ++r)
      out[rows[r]].assign(logits.begin() + static_cast<int64_t>(r) * V,
                          logits.begin() + static_cast<int64_t>(r + 1) * V);
  }
  for (auto& t : tables) t.release(alloc);
  return out;
}

// Sets PAGELLM_MLA_PLAIN_MIN_PROMPT while it lives (read when a model loads).
struct PlainMinPrompt {
  explicit PlainMinPrompt(const char* n) { setenv("PAGELLM_MLA_PLAIN_MIN_PROMPT", n, 1); }
  ~PlainMinPrompt() { unsetenv("PAGELLM_MLA_PLAIN_MIN_PROMPT"); }
};

TEST(DeepSeek2Model, PromptPositionsRunPlainWithTheSameBitsInAnyBatch) {
  const PlainMinPrompt from("8");  // A's and B's prompts run plain, C's 6 tokens do not
  for (DType type : {DType::F32, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(type));
    TempPath path(".gguf");
    ThreadPool pool(2);
    MakeModelSpec sp = spec(1);
    sp.type = type;
    make_model(sp, path.path, pool);
    auto m = ModelRunner::load(path.path);
    MlaSchedule sc;
    sc.ids.resize(3);
    for (int32_t i = 0; i < 45; ++i) sc.ids[0].push_back((i * 37 + 5) % 500);
    for (int32_t i = 0; i < 14; ++i) sc.ids[1].push_back((i * 53 + 11) % 500);
    for (int32_t i = 0; i < 8; ++i) sc.ids[2].push_back((i * 71 + 3) % 500);
    sc.n_prompt = {40, 9, 6};  // positions 40.. of A, 9.. of B, 6.. of C are decoded (absorbed)
    // Alone: A's prompt in one step, then one token a step; B likewise.
    MlaSchedule alone = sc;
    alone.steps = {{{0, 0, 40}}};
    for (int32_t p = 40; p < 45; ++p) alone.steps.push_back({{0, p, p + 1}});
    alone.steps.push_back({{1, 0, 9}});
    for (int32_t p = 9; p < 14; ++p) alone.steps.push_back({{1, p, p + 1}});
    alone.steps.push_back({{2, 0, 6}});
    for (int32_t p = 6; p < 8; ++p) alone.steps.push_back({{2, p, p + 1}});
    const PositionLogits ref = run_schedule(*m, pool, alone);
    // Chunked and batched: A's prompt in chunks of 13-14 beside B's and C's
    // prompts and decode steps (plain and absorbed tokens in one step).
    MlaSchedule mixed = sc;
    mixed.steps = {{{0, 0, 13}, {1, 0, 9}, {2, 0, 6}}, {{1, 9, 10}, {0, 13, 27}, {2, 6, 8}},
                   {{0, 27, 40}, {1, 10, 11}},
                   {{0, 40, 41}, {1, 11, 12}}, {{0, 41, 45}}, {{1, 12, 14}}};
    // Preempted: both recomputed whole, decoded positions with their prompts.
    MlaSchedule recomputed = sc;
    recomputed.steps = {{{1, 0, 14}, {2, 0, 8}, {0, 0, 45}}};
    for (const MlaSchedule* other : {&mixed, &recomputed}) {
      const PositionLogits got = run_schedule(*m, pool, *other);
      ASSERT_EQ(got.size(), ref.size());
      for (const auto& [at, logits] : ref)
        EXPECT_EQ(got.at(at), logits) << "sequence " << at.first << " position " << at.second;
    }
    // The plain form ran: its prompt logits are close to the absorbed form's
    // (the same maths) but not its bits. Q8_0: the forms round different
    // activations to q8_0 (absorbed: q_nope and the attention's latent
    // output; plain: the latent), 2-8% of these logits apart (F32 checks
    // the maths).
    const PositionLogits absorbed = run_schedule(*m, pool, alone, /*prompt_ends=*/false);
    int differ = 0;
    for (int32_t p = 0; p < 40; ++p) {
      test::expect_logits_close(ref.at({0, p}), absorbed.at({0, p}),
                                type == DType::F32 ? 1e-3 : 0.1);
      differ += ref.at({0, p}) != absorbed.at({0, p});
    }
    EXPECT_GT(differ, 0) << "prompt positions gave the absorbed form's bits";
  }
}

TEST(DeepSeek2Model, BadPlainMinPromptIsRefused) {
  TempPath path(".gguf");
  ThreadPool pool(2);
  make_model(spec(1), path.path, pool);
  for (const char* bad : {"-1", "12x", "abc"}) {
    const PlainMinPrompt from(bad);
    EXPECT_THROW(ModelRunner::load(path.path), ConfigError) << bad;
  }
  const PlainMinPrompt from("7");
  EXPECT_EQ(ModelRunner::load(path.path)->hparams().mla.plain_min_prompt, 7);
}

}  // namespace
}  // namespace pagellm
