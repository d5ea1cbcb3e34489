// Helpers for the model tests: one prompt's logits, and how far two logit
// vectors are apart.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"
#include "model/runner.h"

namespace pagellm::test {

// The logits of every position of a fixed 12-token prompt (ids < 512), run as
// one batch on the host with an f32 cache.
inline std::vector<float> prompt_logits(ModelRunner& model, ThreadPool& pool) {
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

// Expects a and b (the reference) of equal size, b not all zero, and
// max |a - b| < rel * max |b| + 1e-3.
inline void expect_logits_close(const std::vector<float>& a, const std::vector<float>& b,
                                double rel) {
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0, max_mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
    max_mag = std::max(max_mag, static_cast<double>(std::fabs(b[i])));
  }
  EXPECT_GT(max_mag, 0.0);
  EXPECT_LT(max_diff, rel * max_mag + 1e-3) << "max |logit| " << max_mag;
}

}  // namespace pagellm::test
