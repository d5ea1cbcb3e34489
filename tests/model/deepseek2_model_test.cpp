// deepseek2 files written by make-model (the softmax golden is
// golden_arch2026_test's): the keys read back as the family's rules say
// (MLA dims, score scale mscale^2 / sqrt(q/k head) computed here from the
// keys, a dense layer 0, the router as written), sigmoid routing loads its
// selection bias on the expert layers only and runs, and make-model refuses
// MLA shapes it cannot write.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gguf/gguf_reader.h"
#include "model/make_model.h"
#include "model/model_test_util.h"
#include "model/runner.h"
#include "support/test_support.h"
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

}  // namespace
}  // namespace pagellm
