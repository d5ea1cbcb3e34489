// The MoE path against the dense one, for every weight type the CPU runs: a
// model with one expert (routed to with weight 1) is the dense model whose FFN
// matrices are that expert's, so the two give the same logits; and the
// repacked expert stacks agree with the file's layout as dense matrices do.
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/make_model.h"
#include "model/model_test_util.h"
#include "model/runner.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

// The dense twin of a one-expert llama file: no expert keys, no router, the
// expert stacks as ffn_gate/up/down.
void write_dense_twin(const std::string& moe_path, const std::string& out) {
  auto src = GgufFile::open(moe_path);
  GgufWriter w;
  for (const auto& kv : src->metadata())
    if (kv.key.find("expert") == std::string::npos) w.set(kv.key, kv.value);
  for (const auto& t : src->tensors()) {
    std::string name = t.name;
    if (name.find("ffn_gate_inp") != std::string::npos) continue;
    std::vector<int64_t> ne = t.ne;
    if (const size_t at = name.find("_exps"); at != std::string::npos) {
      name.erase(at, 5);
      ne.resize(2);
    }
    w.add_tensor(name, t.type, ne, [&t](uint8_t* dst, size_t n) {
      std::copy(t.data, t.data + n, dst);
    });
  }
  w.write_file(out);
}

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,
                        DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::Q2_K,
                        DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,   DType::IQ4_XS,
                        DType::MXFP4};

MakeModelSpec small_moe(DType t, int32_t experts) {
  MakeModelSpec spec;
  spec.arch = "mixtral";
  spec.n_embd = 256;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 256;
  spec.n_expert = experts;
  spec.n_expert_used = 1;
  spec.type = t;
  spec.vocab_from = test::data_path("golden/random/rand-llama-tok512-F32.gguf");
  return spec;
}

TEST(MoeModel, OneExpertIsTheDenseFfnForEveryType) {
  ThreadPool pool(2);
  for (DType t : kTypes) {
    SCOPED_TRACE(dtype_name(t));
    test::TempPath moe(".gguf"), dense(".gguf");
    make_model(small_moe(t, 1), moe.path, pool);
    write_dense_twin(moe.path, dense.path);
    for (bool repack : {true, false}) {
      auto m = ModelRunner::load(moe.path, {.repack = repack});
      auto d = ModelRunner::load(dense.path, {.repack = repack});
      ASSERT_TRUE(m->hparams().moe());
      ASSERT_FALSE(d->hparams().moe());
      // One expert: the same products on the same rows, x + 1 * y.
      test::expect_logits_close(test::prompt_logits(*m, pool), test::prompt_logits(*d, pool), 1e-5);
    }
  }
}

TEST(MoeModel, RepackedExpertsMatchTheFileLayout) {
  ThreadPool pool(2);
  for (DType t : kTypes) {
    SCOPED_TRACE(dtype_name(t));
    test::TempPath path(".gguf");
    make_model(small_moe(t, 4), path.path, pool);
    auto packed = ModelRunner::load(path.path, {.repack = true});
    auto plain = ModelRunner::load(path.path, {.repack = false});
    test::expect_logits_close(test::prompt_logits(*packed, pool), test::prompt_logits(*plain, pool),
                              0.02);
  }
}

}  // namespace
}  // namespace pagellm
