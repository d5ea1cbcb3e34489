// Models with IQ4_NL / IQ4_XS matrices (and gpt-oss-shaped ones with MXFP4
// experts, Q8_0 elsewhere) against the same model with every matrix expanded to F32 (by dequantize_row, checked on hand-built blocks in
// tests/tensor): the quantized kernels see Q8 activations, the F32 ones the
// floats, so the logits agree to activation rounding, not bit for bit.
#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/runner.h"
#include "model/make_model.h"
#include "model/model_test_util.h"
#include "support/test_support.h"
#include "tensor/convert.h"
#include "util/error.h"

namespace pagellm {
namespace {

// A copy of the GGUF file at `src` with every quantized tensor expanded to F32.
void write_expanded(const std::string& src, const std::string& dst) {
  auto f = GgufFile::open(src);
  GgufWriter w;
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  for (const auto& t : f->tensors()) {
    const int64_t n_in = t.ne[0];
    int64_t rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    const size_t in_bytes = dtype_row_bytes(t.type, n_in);
    std::vector<uint8_t> out(static_cast<size_t>(n_in * rows) * sizeof(float));
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(t.type, t.data + static_cast<size_t>(r) * in_bytes,
                     reinterpret_cast<float*>(out.data()) + r * n_in, n_in);
    w.add_tensor(t.name, DType::F32, t.ne, std::move(out));
  }
  w.write_file(dst);
}

TEST(Iq4Model, LogitsMatchTheExpandedModel) {
  ThreadPool pool(2);
  for (DType t : {DType::IQ4_NL, DType::IQ4_XS}) {
    for (bool repack : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (repack ? " repack" : " file layout"));
      test::TempPath quant(".gguf"), expanded(".gguf");
      MakeModelSpec spec;
      spec.n_layer = 2;
      spec.n_embd = 256;  // IQ4_XS rows are whole 256-element super-blocks
      spec.n_ff = 512;
      spec.type = t;
      spec.vocab_from = test::data_path("golden/random/rand-llama-tok512-F32.gguf");
      make_model(spec, quant.path, pool);
      write_expanded(quant.path, expanded.path);
      auto q = ModelRunner::load(quant.path, {.repack = repack});
      auto f = ModelRunner::load(expanded.path, {.repack = repack});
      test::expect_logits_close(test::prompt_logits(*q, pool), test::prompt_logits(*f, pool), 0.03);
    }
  }
}

// As real gpt-oss files: MXFP4 expert stacks (make-model --expert-type), Q8_0
// matrices elsewhere; the routed expert matmuls run the MXFP4 kernels, packed
// or in the file's layout.
TEST(Iq4Model, Mxfp4ExpertsMatchTheExpandedModel) {
  ThreadPool pool(2);
  for (bool repack : {true, false}) {
    SCOPED_TRACE(repack ? "repack" : "file layout");
    test::TempPath quant(".gguf"), expanded(".gguf");
    MakeModelSpec spec;
    spec.arch = "gpt-oss";
    spec.n_layer = 2;
    spec.n_embd = 128;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 64;
    spec.n_expert = 4;
    spec.type = DType::Q8_0;
    spec.expert_type = DType::MXFP4;
    spec.vocab_from = test::data_path("golden/random/rand-llama-tok512-F32.gguf");
    make_model(spec, quant.path, pool);
    {
      auto f = GgufFile::open(quant.path);
      int experts = 0;
      for (const auto& t : f->tensors()) {
        const bool exps = t.name.find("_exps.weight") != std::string::npos;
        experts += exps;
        if (exps) EXPECT_EQ(t.type, DType::MXFP4) << t.name;
        if (!exps && t.ne.size() == 2 && t.name.find("weight") != std::string::npos &&
            t.name.find("gate_inp") == std::string::npos)
          EXPECT_EQ(t.type, DType::Q8_0) << t.name;
      }
      EXPECT_EQ(experts, 3 * spec.n_layer);
    }
    write_expanded(quant.path, expanded.path);
    auto q = ModelRunner::load(quant.path, {.repack = repack});
    auto f = ModelRunner::load(expanded.path, {.repack = repack});
    test::expect_logits_close(test::prompt_logits(*q, pool), test::prompt_logits(*f, pool), 0.03);
  }
}

TEST(Iq4Model, ExpertTypeNeedsExpertsAndWholeBlocks) {
  ThreadPool pool(1);
  test::TempPath out(".gguf");
  MakeModelSpec spec;
  spec.n_layer = 1;
  spec.n_embd = 64;
  spec.n_ff = 64;
  spec.type = DType::F16;
  spec.expert_type = DType::MXFP4;
  spec.vocab_from = test::data_path("golden/random/rand-llama-tok512-F32.gguf");
  EXPECT_THROW(make_model(spec, out.path, pool), ConfigError);  // llama: no experts
  spec.arch = "mixtral";
  spec.n_ff_exp = 48;  // not whole 32-element blocks
  EXPECT_THROW(make_model(spec, out.path, pool), ConfigError);
  spec.expert_type = DType::Q8_K;  // an activation format
  spec.n_ff_exp = 64;
  EXPECT_THROW(make_model(spec, out.path, pool), ConfigError);
}

}  // namespace
}  // namespace pagellm
