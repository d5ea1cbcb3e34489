// Bad metadata for the families' own keys is a FormatError naming the key,
// never a silent fallback (a window that does not fit an int, a negative cap).
#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "model/hparams.h"
#include "model/make_model.h"
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
  spec.sliding_window = 4;
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

}  // namespace
}  // namespace pagellm
