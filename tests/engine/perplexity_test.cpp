// perplexity() against the definition computed here from the model's logits
// (each window in one forward pass with every position's logits).
#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"
#include "kvcache/kv_cache_storage.h"
#include "model/batch.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pagellm {
namespace {

// The windows' scored negative log-likelihoods, straight from the definition.
std::vector<double> reference_nlls(ModelRunner& model, const std::vector<int32_t>& tokens,
                                   int32_t n_ctx, int32_t bos, ThreadPool& pool) {
  const int64_t V = model.hparams().n_vocab;
  std::vector<double> out;
  for (size_t start = 0; start + n_ctx <= tokens.size(); start += n_ctx) {
    BlockAllocator alloc(n_ctx);  // block size 1
    KvCacheStorage kv(model.kv_shape(n_ctx, 1, DType::F32), {{"host", 0, model.hparams().n_layer}});
    BlockTable table(1);
    EXPECT_TRUE(table.reserve(alloc, n_ctx));
    Batch b;
    const int32_t s = b.add_sequence(table);
    for (int32_t p = 0; p < n_ctx; ++p)
      b.add_token(s, p == 0 ? bos : tokens[start + p], p, true);
    std::vector<float> logits;
    model.forward(b, kv, pool, logits);
    for (int32_t p = n_ctx / 2; p + 1 < n_ctx; ++p) {
      const float* row = logits.data() + static_cast<int64_t>(p) * V;
      double z = 0;
      for (int64_t i = 0; i < V; ++i) z += std::exp(static_cast<double>(row[i]));
      out.push_back(std::log(z) - row[tokens[start + p + 1]]);
    }
    table.release(alloc);
  }
  return out;
}

TEST(Perplexity, MatchesTheDefinitionComputedFromTheLogits) {
  auto model = ModelRunner::load(test::data_path("stories260K.gguf"));
  auto tok = Tokenizer::from_gguf(model->file());
  const auto tokens = tok->encode(test::read_file(test::data_path("stories260K.README.md")));
  ASSERT_GT(tokens.size(), 400u);
  ThreadPool pool(2);
  const int32_t n_ctx = 64;
  const auto nlls = reference_nlls(*model, tokens, n_ctx, tok->bos_id(), pool);
  double mean = 0, sq = 0;
  for (double v : nlls) mean += v / static_cast<double>(nlls.size());
  for (double v : nlls) sq += (v - mean) * (v - mean);
  const double want_ppl = std::exp(mean);
  const double want_err = want_ppl * std::sqrt(sq / static_cast<double>(nlls.size()) /
                                               static_cast<double>(nlls.size() - 1));
  // Batches that split windows at and away from the scored half.
  for (int32_t batch : {64, 24, 7}) {
    PerplexityOptions o;
    o.n_ctx = n_ctx;
    o.batch = batch;
    o.kv_type = DType::F32;
    o.bos = tok->bos_id();
    int32_t calls = 0;
    const PerplexityResult r =
        perplexity(*model, tokens, o, pool, [&](int32_t done, int32_t total, double) {
          EXPECT_EQ(done, ++calls);
          EXPECT_EQ(total, static_cast<int32_t>(tokens.size() / n_ctx));
        });
    EXPECT_EQ(r.windows, static_cast<int32_t>(tokens.size() / n_ctx));
    EXPECT_EQ(r.tokens, static_cast<int64_t>(r.windows) * (n_ctx - 1 - n_ctx / 2));
    EXPECT_EQ(r.tokens, static_cast<int64_t>(nlls.size()));
    EXPECT_NEAR(r.ppl, want_ppl, 1e-4 * want_ppl) << "batch " << batch;
    EXPECT_NEAR(r.ppl_stderr, want_err, 1e-3 * want_err) << "batch " << batch;
  }
}

TEST(Perplexity, ShortTextIsAClearError) {
  auto model = ModelRunner::load(test::data_path("stories260K.gguf"));
  ThreadPool pool(1);
  PerplexityOptions o;
  o.n_ctx = 64;
  try {
    perplexity(*model, std::vector<int32_t>(100, 5), o, pool);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "the text is 100 tokens; perplexity needs at least 2 x the context (128 tokens): "
                 "use a longer text or a smaller -c");
  }
}

}  // namespace
}  // namespace pagellm
