// Fill-in-the-middle token ids: from the GGUF keys (new and older names),
// else found by text as llama.cpp finds them.
#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace pagellm {
namespace {

GgufWriter base_gguf() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  w.set("tokenizer.ggml.model", GgufValue::str("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::str_array({"<unk>", "<s>", "</s>", "a", "b", "c", "d"}));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array({2, 3, 3, 1, 1, 1, 1}));
  return w;
}

Vocab load(const GgufWriter& w) {
  test::TempPath tmp(".gguf");
  w.write_file(tmp.path);
  return Vocab::from_gguf(*GgufFile::open(tmp.path));
}

TEST(VocabFim, NoneWithoutKeysOrTexts) {
  const Vocab v = load(base_gguf());
  EXPECT_EQ(v.fim_pre(), kNoToken);
  EXPECT_EQ(v.fim_suf(), kNoToken);
  EXPECT_EQ(v.fim_mid(), kNoToken);
  EXPECT_EQ(v.fim_rep(), kNoToken);
  EXPECT_EQ(v.fim_sep(), kNoToken);
}

TEST(VocabFim, FromKeys) {
  GgufWriter w = base_gguf();
  w.set("tokenizer.ggml.fim_pre_token_id", GgufValue::u32(3));
  w.set("tokenizer.ggml.fim_suf_token_id", GgufValue::u32(4));
  w.set("tokenizer.ggml.fim_mid_token_id", GgufValue::u32(5));
  w.set("tokenizer.ggml.fim_rep_token_id", GgufValue::u32(6));
  w.set("tokenizer.ggml.fim_sep_token_id", GgufValue::u32(0xFFFFFFFFu));  // none
  const Vocab v = load(w);
  EXPECT_EQ(v.fim_pre(), 3);
  EXPECT_EQ(v.fim_suf(), 4);
  EXPECT_EQ(v.fim_mid(), 5);
  EXPECT_EQ(v.fim_rep(), 6);
  EXPECT_EQ(v.fim_sep(), kNoToken);
}

TEST(VocabFim, OlderKeysAndTheNewOnesWin) {
  GgufWriter w = base_gguf();
  w.set("tokenizer.ggml.prefix_token_id", GgufValue::u32(6));
  w.set("tokenizer.ggml.suffix_token_id", GgufValue::u32(5));
  w.set("tokenizer.ggml.middle_token_id", GgufValue::u32(4));
  w.set("tokenizer.ggml.fim_mid_token_id", GgufValue::u32(3));
  const Vocab v = load(w);
  EXPECT_EQ(v.fim_pre(), 6);
  EXPECT_EQ(v.fim_suf(), 5);
  EXPECT_EQ(v.fim_mid(), 3);
}

TEST(VocabFim, KeyOutsideTheVocabularyIsRefused) {
  GgufWriter w = base_gguf();
  w.set("tokenizer.ggml.fim_suf_token_id", GgufValue::u32(7));
  try {
    load(w);
    ADD_FAILURE() << "accepted an id outside the vocabulary";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("fim_suf_token_id"), std::string::npos) << e.what();
  }
}

TEST(VocabFim, FoundByText) {
  Vocab::Spec spec;
  spec.model = "gpt2";
  spec.pre = "default";
  spec.tokens = {"a", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|repo_name|>",
                 "<|file_sep|>", "b"};
  const Vocab v(spec);
  EXPECT_EQ(v.fim_pre(), 1);
  EXPECT_EQ(v.fim_mid(), 2);
  EXPECT_EQ(v.fim_suf(), 3);
  EXPECT_EQ(v.fim_rep(), 4);
  EXPECT_EQ(v.fim_sep(), 5);
  // A key naming "none" is not overridden by a text match.
  spec.fim_pre = kNoToken;
  EXPECT_EQ(Vocab(spec).fim_pre(), kNoToken);
}

TEST(VocabFim, StarCoderVocabulary) {
  const auto file = GgufFile::open(test::data_path("tokenizer-vectors/ggml-vocab-starcoder.gguf"));
  const Vocab v = Vocab::from_gguf(*file);
  EXPECT_EQ(v.text(v.fim_pre()), "<fim_prefix>");
  EXPECT_EQ(v.text(v.fim_suf()), "<fim_suffix>");
  EXPECT_EQ(v.text(v.fim_mid()), "<fim_middle>");
}

}  // namespace
}  // namespace pagellm
