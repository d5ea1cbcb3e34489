// The Rows16 repacked matrices (ModelLoadOptions::repack) against the file's
// own layout, on random-weight models of every packable type: the two runs use
// different kernels and activation rounding, so their logits agree closely
// rather than bit for bit (each kernel is held to its exact contract in
// tests/backend).
#include <gtest/gtest.h>

#include "model/runner.h"
#include "model/make_model.h"
#include "model/model_test_util.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

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
    auto packed = ModelRunner::load(path.path, {.repack = true});
    auto plain = ModelRunner::load(path.path, {.repack = false});
    ASSERT_GT(packed->weights().streamed_bytes_per_token(), 0u);
    SCOPED_TRACE(dtype_name(t));
    test::expect_logits_close(test::prompt_logits(*packed, pool), test::prompt_logits(*plain, pool),
                              0.02);
  }
}

}  // namespace
}  // namespace pagellm
