// The Rows16 repacked matrices (ModelLoadOptions::repack) against the file's
// own layout, on random-weight models of every packable type: the two runs use
// different kernels and activation rounding, so their logits agree closely
// rather than bit for bit (each kernel is held to its exact contract in
// tests/backend).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"
#include "model/llama_model.h"
#include "model/make_model.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

std::vector<float> prompt_logits(LlamaModel& model, ThreadPool& pool) {
  const int32_t bs = 16;
  const std::vector<int32_t> prompt = {1, 17, 255, 3, 400, 88, 9, 120, 33, 500, 2, 64};
  BlockAllocator alloc(2);
  KvCacheStorage kv(model.kv_shape(alloc.num_blocks(), bs, DType::F32),
                    {{"host", 0, model.hparams().n_layer}});
  BlockTable table(bs);
  EXPECT_TRUE(table.reserve(alloc, static_cast<int64_t>(prompt.size())));
  Batch b;
  const int32_t s = b.add_sequence(table);
  for (size_t i = 0; i < prompt.size(); ++i)
    b.add_token(s, prompt[i], static_cast<int32_t>(i), true);
  std::vector<float> logits;
  model.forward(b, kv, pool, logits);
  table.release(alloc);
  return logits;
}

TEST(Repack, LogitsMatchTheFileLayoutForEveryPackableType) {
  ThreadPool pool(2);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    test::TempPath path(".gguf");
    MakeModelSpec spec;
    spec.n_layer = 2;
    spec.type = t;
    spec.vocab_from = test::data_path("golden/random/rand-llama-tok512-F32.gguf");
    make_model(spec, path.path, pool);
    auto packed = LlamaModel::load(path.path, {.repack = true});
    auto plain = LlamaModel::load(path.path, {.repack = false});
    ASSERT_GT(packed->weights().streamed_bytes_per_token(), 0u);
    const auto a = prompt_logits(*packed, pool), b = prompt_logits(*plain, pool);
    ASSERT_EQ(a.size(), b.size());
    double max_diff = 0, max_mag = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
      max_mag = std::max(max_mag, static_cast<double>(std::fabs(b[i])));
    }
    EXPECT_GT(max_mag, 0.0) << dtype_name(t);
    EXPECT_LT(max_diff, 0.02 * max_mag + 1e-3) << dtype_name(t) << ": max |logit| " << max_mag;
  }
}

}  // namespace
}  // namespace pagellm
