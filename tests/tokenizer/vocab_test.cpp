#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"
#include "tokenizer/tiny_vocab.h"
#include "util/error.h"

namespace pagellm {
namespace {

// Expects `fn` to throw FormatError whose message contains `needle`.
template <typename Fn>
void expect_format_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no FormatError; expected one mentioning " << needle;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Vocab, Stories260KMetadata) {
  auto file = GgufFile::open(test::data_path("stories260K.gguf"));
  const Vocab v = Vocab::from_gguf(*file);
  EXPECT_EQ(v.model(), "llama");
  EXPECT_EQ(v.n_tokens(), 512);
  EXPECT_EQ(v.bos(), 1);
  EXPECT_EQ(v.eos(), 2);
  EXPECT_EQ(v.unk(), 0);
  EXPECT_EQ(v.sep(), kNoToken);  // stored as 0xFFFFFFFF
  EXPECT_EQ(v.pad(), kNoToken);
  EXPECT_TRUE(v.add_bos());  // no key: llama default
  EXPECT_FALSE(v.add_eos());
  EXPECT_TRUE(v.add_space_prefix());
  EXPECT_EQ(v.type(0), TokenType::kUnknown);
  EXPECT_EQ(v.type(1), TokenType::kControl);
  EXPECT_EQ(v.type(3), TokenType::kByte);
  EXPECT_EQ(v.byte_token(0x0A), 3 + 0x0A);
  EXPECT_EQ(v.byte_value(3 + 0xFF), 0xFF);
  EXPECT_EQ(v.byte_value(300), -1);
  EXPECT_EQ(v.find("<s>"), 1);
  EXPECT_EQ(v.find("no such token"), kNoToken);
  EXPECT_TRUE(v.is_eog(2));
  EXPECT_FALSE(v.is_eog(1));
  // <unk>, </s>, <s>: the special tokens, longest text first.
  EXPECT_EQ(v.special_tokens(), (std::vector<int32_t>{0, 2, 1}));
}

TEST(Vocab, LlamaSpmVocabKeys) {
  auto file = GgufFile::open(test::data_path("tokenizer-vectors/ggml-vocab-llama-spm.gguf"));
  const Vocab v = Vocab::from_gguf(*file);
  EXPECT_EQ(v.n_tokens(), 32000);
  EXPECT_EQ(v.pre(), "default");
  EXPECT_TRUE(v.add_bos());
  EXPECT_FALSE(v.add_eos());
  EXPECT_EQ(v.find("\xE2\x96\x81\xE2\x96\x81"), 259);  // "▁▁"
}

TEST(Vocab, DirectConstructionAndDefaults) {
  const Vocab v(test::tiny_spec({{"a", -1.0f}}));
  EXPECT_EQ(v.n_tokens(), 260);
  EXPECT_EQ(v.find("a"), 259);
  EXPECT_EQ(v.score(259), -1.0f);
  EXPECT_EQ(v.bos(), 1);
  EXPECT_TRUE(v.add_bos());

  Vocab::Spec plain;  // no scores, no types
  plain.tokens = {"x", "", "x"};
  const Vocab p(plain);
  EXPECT_EQ(p.type(0), TokenType::kNormal);
  EXPECT_EQ(p.score(1), 0.0f);
  EXPECT_EQ(p.text(1), "[EMPTY_1]");
  EXPECT_EQ(p.find("x"), 2);  // the later duplicate wins
  EXPECT_EQ(p.bos(), 1);
  EXPECT_EQ(p.eos(), 2);
  EXPECT_EQ(p.unk(), 0);

  Vocab::Spec tiny;  // llama defaults that do not fit the vocabulary mean "none"
  tiny.tokens = {"x"};
  tiny.add_bos = false;
  const Vocab t(tiny);
  EXPECT_EQ(t.bos(), kNoToken);
  EXPECT_EQ(t.eos(), kNoToken);
  EXPECT_EQ(t.unk(), 0);
}

TEST(Vocab, EndOfTurnTokensAreEog) {
  Vocab::Spec s;
  s.model = "gpt2";
  s.tokens = {"a", "b", "<|im_end|>", "<|endoftext|>"};
  s.bos = 3;
  s.eos = 3;
  const Vocab v(s);
  EXPECT_TRUE(v.is_eog(2));
  EXPECT_TRUE(v.is_eog(3));
  EXPECT_FALSE(v.is_eog(0));
  EXPECT_EQ(v.type(2), TokenType::kControl);
  EXPECT_FALSE(v.add_bos());
  EXPECT_FALSE(v.add_space_prefix());
}

TEST(Vocab, RejectsInconsistentSpecs) {
  auto base = [] { return test::tiny_spec({{"a", 0.0f}}); };
  expect_format_error(
      [&] {
        auto s = base();
        s.scores.pop_back();
        Vocab v(s);
      },
      "'tokenizer.ggml.scores' has 259 entries but 'tokenizer.ggml.tokens' has 260");
  expect_format_error(
      [&] {
        auto s = base();
        s.types.push_back(TokenType::kNormal);
        Vocab v(s);
      },
      "'tokenizer.ggml.token_type' has 261 entries");
  expect_format_error(
      [&] {
        auto s = base();
        s.types[5] = static_cast<TokenType>(9);
        Vocab v(s);
      },
      "'tokenizer.ggml.token_type'[5] is 9");
  expect_format_error(
      [&] {
        auto s = base();
        s.bos = 260;
        Vocab v(s, "m.gguf");
      },
      "m.gguf: 'tokenizer.ggml.bos_token_id' is 260, outside the vocabulary (260 tokens)");
  expect_format_error(
      [&] {
        auto s = base();
        s.eos = -5;
        Vocab v(s);
      },
      "'tokenizer.ggml.eos_token_id' is -5");
  expect_format_error(
      [&] {
        auto s = base();
        s.tokens[10] = "<0xZZ>";
        Vocab v(s);
      },
      "'tokenizer.ggml.tokens'[10] is a BYTE token but is spelled '<0xZZ>'");
  expect_format_error(
      [&] {
        Vocab::Spec s;
        Vocab v(s);
      },
      "'tokenizer.ggml.tokens' has no tokens");
  expect_format_error(
      [&] {
        auto s = base();
        s.bos = kNoToken;
        Vocab v(s);
      },
      "'tokenizer.ggml.add_bos_token' is set but there is no BOS token");
}

// A GGUF file with only tokenizer keys, for the malformed-metadata tests.
GgufWriter tiny_gguf() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  w.set("tokenizer.ggml.model", GgufValue::str("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::str_array({"<unk>", "<s>", "</s>", "a", "b"}));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array({0, 0, 0, -1, -2}));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array({2, 3, 3, 1, 1}));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  w.set("tokenizer.ggml.padding_token_id", GgufValue::u32(0xFFFFFFFFu));
  return w;
}

Vocab load(const GgufWriter& w) {
  test::TempPath tmp(".gguf");
  w.write_file(tmp.path);
  auto file = GgufFile::open(tmp.path);
  return Vocab::from_gguf(*file);
}

TEST(Vocab, FromWrittenGguf) {
  GgufWriter w = tiny_gguf();
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  w.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(false));
  w.set("tokenizer.ggml.eot_token_id", GgufValue::u32(4));
  const Vocab v = load(w);
  EXPECT_EQ(v.n_tokens(), 5);
  EXPECT_EQ(v.score(4), -2.0f);
  EXPECT_FALSE(v.add_bos());
  EXPECT_FALSE(v.add_space_prefix());
  EXPECT_EQ(v.pad(), kNoToken);
  EXPECT_EQ(v.eot(), 4);
  EXPECT_TRUE(v.is_eog(4));
}

TEST(Vocab, RejectsMalformedGgufMetadata) {
  {
    GgufWriter w = tiny_gguf();
    w.set("tokenizer.ggml.scores", GgufValue::f32_array({0, 0, 0, -1}));
    expect_format_error([&] { load(w); },
                        "'tokenizer.ggml.scores' has 4 entries but 'tokenizer.ggml.tokens' has 5");
  }
  {
    GgufWriter w = tiny_gguf();
    w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(7));
    expect_format_error([&] { load(w); },
                        "'tokenizer.ggml.bos_token_id' is 7, outside the vocabulary (5 tokens)");
  }
  {
    GgufWriter w = tiny_gguf();
    w.set("tokenizer.ggml.token_type", GgufValue::f32_array({1, 1, 1, 1, 1}));
    expect_format_error([&] { load(w); },
                        "'tokenizer.ggml.token_type' must be an array of i32, not of f32");
  }
  {
    GgufWriter w = tiny_gguf();
    w.set("tokenizer.ggml.token_type", GgufValue::i32_array({2, 3, 3, 1, 42}));
    expect_format_error([&] { load(w); }, "'tokenizer.ggml.token_type'[4] is 42");
  }
  {
    GgufWriter w = tiny_gguf();
    w.set("tokenizer.ggml.tokens", GgufValue::str("abc"));
    expect_format_error([&] { load(w); }, "'tokenizer.ggml.tokens' must be an array");
  }
  {
    GgufWriter w = tiny_gguf();
    w.set("tokenizer.ggml.eos_token_id", GgufValue::str("2"));
    expect_format_error([&] { load(w); }, "'tokenizer.ggml.eos_token_id' must be an integer");
  }
  {
    GgufWriter w;
    w.set("tokenizer.ggml.model", GgufValue::str("llama"));
    expect_format_error([&] { load(w); }, "missing required key 'tokenizer.ggml.tokens'");
  }
  {
    GgufWriter w;
    w.set("tokenizer.ggml.tokens", GgufValue::str_array({"a"}));
    expect_format_error([&] { load(w); }, "tokenizer.ggml.model");
  }
}

}  // namespace
}  // namespace pagellm
