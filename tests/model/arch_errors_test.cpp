// Bad metadata for the families' own keys is a FormatError naming the key,
// never a silent fallback (a window that does not fit an int, a negative cap).
#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "model/hparams.h"
#include "model/registry.h"
#include "model/make_model.h"
#include "model/weights.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

// A gemma-family file from make-model, then its metadata with one key changed.
std::string error_with(const std::string& arch, const std::string& key, GgufValue value) {
  test::TempPath good(".gguf");
  MakeModelSpec spec;
  spec.arch = arch;
  spec.n_embd = 32;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.n_head_kv = 1;
  spec.n_ff = 32;
  spec.sliding_window = arch == "gemma2" || arch == "gemma3" ? 4 : 0;
  spec.type = DType::Q8_0;
  spec.vocab_from = test::data_path("stories260K.gguf");
  ThreadPool pool(1);
  make_model(spec, good.path, pool);
  auto src = GgufFile::open(good.path);
  GgufWriter w;
  for (const auto& kv : src->metadata()) w.set(kv.key, kv.key == key ? value : kv.value);
  w.set(key, value);
  for (const auto& t : src->tensors())
    w.add_tensor(t.name, t.type, t.ne, [&t](uint8_t* dst, size_t n) {
      std::copy(t.data, t.data + n, dst);
    });
  test::TempPath bad(".gguf");
  w.write_file(bad.path);
  try {
    auto f = GgufFile::open(bad.path);
    (void)ModelHParams::from_gguf(*f);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(ArchErrors, FamilyKeysAreCheckedAndNamed) {
  const std::string window = error_with("gemma3", "gemma3.attention.sliding_window",
                                        GgufValue::u64(uint64_t{1} << 40));
  EXPECT_NE(window.find("gemma3.attention.sliding_window"), std::string::npos) << window;
  const std::string window2 = error_with("gemma2", "gemma2.attention.sliding_window",
                                         GgufValue::u64(uint64_t{1} << 32));
  EXPECT_NE(window2.find("gemma2.attention.sliding_window"), std::string::npos) << window2;
  const std::string cap =
      error_with("gemma2", "gemma2.attn_logit_softcapping", GgufValue::f32(-50.0f));
  EXPECT_NE(cap.find("'gemma2.attn_logit_softcapping' must be positive"), std::string::npos) << cap;
  const std::string base = error_with("gemma3", "gemma3.rope.freq_base_swa", GgufValue::f32(0.0f));
  EXPECT_NE(base.find("'gemma3.rope.freq_base_swa' must be positive"), std::string::npos) << base;
  const std::string arch = error_with("gemma3", "general.architecture", GgufValue::str("mamba"));
  EXPECT_NE(arch.find("'mamba' is not supported"), std::string::npos) << arch;
  EXPECT_NE(arch.find("gemma3"), std::string::npos) << arch;  // the registry's list
}

// Expert keys: used count within 1..expert_count and present; expert tensors
// of the wrong shape name the tensor when the model loads.
TEST(ArchErrors, ExpertKeysAreChecked) {
  const std::string used = error_with("mixtral", "llama.expert_used_count", GgufValue::u32(9));
  EXPECT_NE(used.find("'llama.expert_used_count': value 9 out of range [1, 8]"), std::string::npos)
      << used;
  const std::string zero = error_with("qwen3moe", "qwen3moe.expert_used_count", GgufValue::u32(0));
  EXPECT_NE(zero.find("qwen3moe.expert_used_count"), std::string::npos) << zero;
  const std::string ff =
      error_with("qwen3moe", "qwen3moe.expert_feed_forward_length", GgufValue::u32(0));
  EXPECT_NE(ff.find("qwen3moe.expert_feed_forward_length"), std::string::npos) << ff;
  const std::string none = error_with("qwen3moe", "qwen3moe.expert_count", GgufValue::u32(0));
  EXPECT_NE(none.find("qwen3moe needs 'qwen3moe.expert_count'"), std::string::npos) << none;
  const std::string many = error_with("mixtral", "llama.expert_count", GgufValue::u32(1u << 20));
  EXPECT_NE(many.find("llama.expert_count"), std::string::npos) << many;
  // The tensors then no longer match the header: the loader names the tensor.
  const std::string shape = [] {
    try {
      test::TempPath good(".gguf");
      MakeModelSpec spec;
      spec.arch = "mixtral";
      spec.n_embd = 32;
      spec.n_layer = 1;
      spec.n_head = 2;
      spec.n_head_kv = 1;
      spec.n_ff = 32;
      spec.type = DType::Q8_0;
      spec.vocab_from = test::data_path("stories260K.gguf");
      ThreadPool pool(1);
      make_model(spec, good.path, pool);
      auto src = GgufFile::open(good.path);
      GgufWriter w;
      for (const auto& kv : src->metadata())
        w.set(kv.key, kv.key == "llama.expert_count" ? GgufValue::u32(4) : kv.value);
      for (const auto& t : src->tensors())
        w.add_tensor(t.name, t.type, t.ne, [&t](uint8_t* dst, size_t n) {
          std::copy(t.data, t.data + n, dst);
        });
      test::TempPath bad(".gguf");
      w.write_file(bad.path);
      auto f = GgufFile::open(bad.path);
      const ModelHParams hp = ModelHParams::from_gguf(*f);
      (void)ModelWeights::load(*f, hp, find_architecture(hp.arch, f->path()));
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(shape.find("blk.0.ffn_gate_inp.weight' has shape [32, 8], expected [32, 4]"),
            std::string::npos)
      << shape;
}

}  // namespace
}  // namespace pagellm
