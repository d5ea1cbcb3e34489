// pagellm bench --roofline's runner and its bandwidth probe, on stories260K
// with a small spec: every stage runs and the figures hang together.
#include "engine/roofline.h"

#include <gtest/gtest.h>

#include "backend/cpu/bandwidth.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

TEST(Bandwidth, MeasuresPositiveRates) {
  ThreadPool pool(2);
  cpu::Bandwidth bw = cpu::measure_bandwidth(pool, size_t{16} << 20, 2);
  EXPECT_GT(bw.read_bytes_per_s, 1e8);
  EXPECT_GT(bw.triad_bytes_per_s, 1e8);
  EXPECT_EQ(bw.buffer_bytes % 8192, 0u);
}

TEST(Roofline, EveryStageReportsConsistentFigures) {
  auto model = LlamaModel::load(test::data_path("stories260K.gguf"));
  auto tok = Tokenizer::from_gguf(model->file());
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.prefix_caching = false;
  Engine engine(*model, *tok, pool, cfg);
  RooflineSpec spec;
  spec.decode_prompt = 4;
  spec.decode_gen = 8;
  spec.prefill_lens = {16, 40};
  spec.concurrencies = {1, 3};
  spec.batch_prompt = 4;
  spec.batch_gen = 6;
  std::vector<std::string> stages;
  const uint64_t wbytes = model->weights().streamed_bytes_per_token();
  EXPECT_GT(wbytes, 0u);
  RooflineResult r = run_roofline(engine, pool, model->hparams().n_vocab, wbytes, spec,
                                  [&](const std::string& s) { stages.push_back(s); });
  EXPECT_EQ(stages.size(), 2u + spec.prefill_lens.size() + spec.concurrencies.size());
  EXPECT_GT(r.bandwidth.read_bytes_per_s, 0);
  EXPECT_GT(r.decode_tokens_per_s, 0);
  EXPECT_DOUBLE_EQ(r.decode_ceiling_tokens_per_s,
                   r.bandwidth.read_bytes_per_s / static_cast<double>(wbytes));
  EXPECT_DOUBLE_EQ(r.decode_fraction, r.decode_tokens_per_s / r.decode_ceiling_tokens_per_s);
  ASSERT_EQ(r.prefill.size(), 2u);
  for (const auto& p : r.prefill) EXPECT_GT(p.tokens_per_s, 0);
  ASSERT_EQ(r.batched.size(), 2u);
  EXPECT_EQ(r.batched[1].concurrency, 3);
  for (const auto& b : r.batched) {
    EXPECT_GT(b.generated_tokens_per_s, 0);
    EXPECT_GT(b.decode_tokens_per_s, 0);
  }
  // Nothing leaked: every block is back.
  const auto st = engine.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.blocks.used, 0);
}

}  // namespace
}  // namespace pagellm
