// Sampler defaults: flag > the model's general.sampling.* keys > built-in,
// and requests keeping the fields they give.
#include "engine/sampling_defaults.h"

#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

std::unique_ptr<GgufFile> file_with(const std::vector<std::pair<std::string, GgufValue>>& kvs,
                                    test::TempPath& path) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  for (const auto& [k, v] : kvs) w.set(k, v);
  w.write_file(path.path);
  return GgufFile::open(path.path);
}

TEST(SamplingDefaults, ReadsTheModelsKeysOfAnyNumericType) {
  test::TempPath path(".gguf");
  auto f = file_with({{"general.sampling.temp", GgufValue::f32(0.6f)},
                      {"general.sampling.top_k", GgufValue::i32(20)},
                      {"general.sampling.top_p", GgufValue::f64(0.95)},
                      {"general.sampling.min_p", GgufValue::u32(0)},
                      {"general.sampling.penalty_repeat", GgufValue::f32(1.05f)},
                      {"general.sampling.mirostat", GgufValue::i32(2)}},  // not ours: ignored
                     path);
  const ModelSampling m = read_model_sampling(*f);
  ASSERT_TRUE(m.temperature && m.top_k && m.top_p && m.min_p && m.repetition_penalty);
  EXPECT_FLOAT_EQ(*m.temperature, 0.6f);
  EXPECT_EQ(*m.top_k, 20);
  EXPECT_FLOAT_EQ(*m.top_p, 0.95f);
  EXPECT_FLOAT_EQ(*m.min_p, 0.0f);  // a declared zero is a value, not an absence
  EXPECT_FLOAT_EQ(*m.repetition_penalty, 1.05f);
  EXPECT_TRUE(m.warnings.empty());
}

TEST(SamplingDefaults, UnusableKeysAreIgnoredWithAWarning) {
  test::TempPath path(".gguf");
  auto f = file_with({{"general.sampling.temp", GgufValue::str("hot")},
                      {"general.sampling.top_p", GgufValue::f32(0.0f)},  // top_p must be > 0
                      {"general.sampling.min_p", GgufValue::f32(1.5f)},
                      {"general.sampling.top_k", GgufValue::i32(-1)}},  // llama.cpp: off
                     path);
  const ModelSampling m = read_model_sampling(*f);
  EXPECT_FALSE(m.temperature);
  EXPECT_FALSE(m.top_p);
  EXPECT_FALSE(m.min_p);
  ASSERT_TRUE(m.top_k);
  EXPECT_EQ(*m.top_k, 0);
  ASSERT_EQ(m.warnings.size(), 3u);
  EXPECT_NE(m.warnings[0].find("general.sampling.temp"), std::string::npos) << m.warnings[0];
}

TEST(SamplingDefaults, FlagBeatsModelBeatsBuiltin) {
  SamplingParams builtin;  // llama.cpp's: 0.8, 40, 0.95, 0.05, 1
  SamplingParams flags = builtin;
  flags.top_k = 7;
  flags.temperature = 0.3f;  // not given: must not count
  flags.repeat_last_n = 32;  // no model key: always the flag's
  SamplingFields given;
  given.top_k = true;
  ModelSampling model;
  model.temperature = 0.6f;
  model.top_k = 20;
  const SamplingDefaults d = SamplingDefaults::resolve(builtin, flags, given, model);
  EXPECT_FLOAT_EQ(d.params.temperature, 0.6f);
  EXPECT_EQ(d.source.temperature, DefaultSource::kModel);
  EXPECT_EQ(d.params.top_k, 7);
  EXPECT_EQ(d.source.top_k, DefaultSource::kFlag);
  EXPECT_FLOAT_EQ(d.params.top_p, builtin.top_p);
  EXPECT_EQ(d.source.top_p, DefaultSource::kBuiltin);
  EXPECT_EQ(d.params.repeat_last_n, 32);
  EXPECT_FALSE(d.has_seed);
  EXPECT_TRUE(d.any_from_model());
  EXPECT_EQ(d.describe(),
            "temp 0.6 (model), top_k 7 (--top-k), top_p 0.95 (default), min_p 0.05 (default), "
            "repeat_penalty 1 (default)");
}

TEST(SamplingDefaults, FillKeepsWhatTheRequestGave) {
  SamplingDefaults d = SamplingDefaults::openai();
  d.params.temperature = 0.0f;
  d.params.top_k = 5;
  d.params.seed = 99;
  d.has_seed = true;
  SamplingParams req = SamplingDefaults::openai().params;
  req.temperature = 1.3f;
  req.seed = 4;
  SamplingFields given;
  given.temperature = true;
  SamplingParams out = d.fill(req, given);
  EXPECT_FLOAT_EQ(out.temperature, 1.3f);  // given: kept
  EXPECT_EQ(out.top_k, 5);                 // left out: the default
  EXPECT_EQ(out.seed, 99u);                // left out, and the server has a seed
  given.seed = true;
  EXPECT_EQ(d.fill(req, given).seed, 4u);
  d.has_seed = false;
  given.seed = false;
  EXPECT_EQ(d.fill(req, given).seed, 4u);  // no server seed: the request's random one
}

TEST(SamplingDefaults, OpenAisAreTheServersBuiltins) {
  const SamplingParams p = SamplingDefaults::openai().params;
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_FLOAT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_FLOAT_EQ(p.min_p, 0.0f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_NO_THROW(p.validate());
}

}  // namespace
}  // namespace pagellm
