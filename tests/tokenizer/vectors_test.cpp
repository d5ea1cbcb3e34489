// Every vocabulary in tests/data/tokenizer-vectors against its reference ids
// (add_special=false, parse_special=false), round trips, and streaming
// detokenization of random ids.
#include <gtest/gtest.h>

#include <random>

#include "gguf/gguf_reader.h"
#include "support/test_support.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_vectors.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load(const std::string& gguf) {
  auto file = GgufFile::open(test::data_path("tokenizer-vectors/" + gguf));
  return Tokenizer::from_gguf(*file);
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else
      out.push_back(static_cast<char>(c));
  }
  return out;
}

// Vocabularies with vectors: file name, and the number of cases.
const std::vector<std::string> kWithVectors = {
    "ggml-vocab-llama-spm.gguf",    "ggml-vocab-phi-3.gguf",     "ggml-vocab-gpt-2.gguf",
    "ggml-vocab-mpt.gguf",          "ggml-vocab-starcoder.gguf", "ggml-vocab-refact.gguf",
    "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-bert-bge.gguf",
};

// Every vocabulary file, with or without vectors.
const std::vector<std::string> kAll = {
    "ggml-vocab-llama-spm.gguf",    "ggml-vocab-phi-3.gguf",
    "ggml-vocab-gpt-2.gguf",        "ggml-vocab-mpt.gguf",
    "ggml-vocab-starcoder.gguf",    "ggml-vocab-refact.gguf",
    "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-bert-bge.gguf",
    "ggml-vocab-falcon.gguf",       "ggml-vocab-deepseek-coder.gguf",
    "ggml-vocab-gpt-neox.gguf",     "ggml-vocab-baichuan.gguf",
};

std::string param_name(const testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(std::string("ggml-vocab-").size());
  name = name.substr(0, name.find(".gguf"));
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

class VocabVectors : public testing::TestWithParam<std::string> {};

void expect_vectors(const Tokenizer& tok, const std::string& vectors_of) {
  const auto cases = test::load_vectors(vectors_of);
  ASSERT_EQ(cases.size(), 46u);
  int passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids got = tok.encode(cases[i].text, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(got, cases[i].ids) << "case " << i << ": '" << printable(cases[i].text) << "'";
    passed += got == cases[i].ids;
  }
  std::printf("%s: %d/%zu cases pass\n", vectors_of.c_str(), passed, cases.size());
}

TEST_P(VocabVectors, EncodeMatchesReference) {
  auto tok = load(GetParam());
  expect_vectors(*tok, GetParam());
}

// decode(encode(x)) == x wherever decoding the reference ids gives x back
// (SentencePiece vocabs give " " + x: the space prefix).
TEST_P(VocabVectors, RoundTrip) {
  auto tok = load(GetParam());
  int checked = 0;
  for (const auto& c : test::load_vectors(GetParam())) {
    const std::string ref = tok->decode(c.ids);
    const std::string mine = tok->decode(tok->encode(c.text, false));
    EXPECT_EQ(mine, ref) << "'" << printable(c.text) << "'";
    if (ref == c.text || ref == " " + c.text) ++checked;
  }
  std::printf("%s: %d inputs round-trip exactly\n", GetParam().c_str(), checked);
}

INSTANTIATE_TEST_SUITE_P(TokenizerVectors, VocabVectors, testing::ValuesIn(kWithVectors),
                         param_name);

// GPT-NeoX and MPT share one tokenizer (the same tokens and merges), but the
// NeoX file has no tokenizer.ggml.pre: the reference then splits punctuation
// runs off first ("'s" is two words), then as GPT-2, then digit runs and
// triples; MPT's file names GPT-2's split. On text without punctuation or
// digits the two agree.
TEST(VocabVectorsExtra, GptNeoxWithoutPreKeySplitsPunctuationFirst) {
  auto neox = load("ggml-vocab-gpt-neox.gguf");
  auto mpt = load("ggml-vocab-mpt.gguf");
  EXPECT_EQ(neox->vocab().pre(), "");
  EXPECT_NE(neox->vocab().warning().find("no 'tokenizer.ggml.pre' key"), std::string::npos);
  EXPECT_TRUE(mpt->vocab().warning().empty());
  auto pieces = [](const Tokenizer& t, const std::string& text) {
    std::vector<std::string> out;
    for (int32_t id : t.encode(text, false)) out.push_back(t.token_to_piece(id));
    return out;
  };
  EXPECT_EQ(pieces(*neox, "Bob's cat"), (std::vector<std::string>{"Bob", "'", "s", " cat"}));
  EXPECT_EQ(pieces(*mpt, "Bob's cat"), (std::vector<std::string>{"Bob", "'s", " cat"}));
  for (const char* text : {"hello world", "  two  spaces\n\nand lines", "Ünïcödé wörds here"})
    EXPECT_EQ(neox->encode(text, false), mpt->encode(text, false)) << text;
  // Words and digits: every piece is all punctuation, or has none.
  for (const std::string& p : pieces(*neox, "a,b.c!! x--y (z) 12345 tea's")) {
    const bool punct = p.find_first_of(",.!-()'") != std::string::npos;
    if (punct) {
      EXPECT_EQ(p.find_first_not_of(",.!-()'"), std::string::npos) << p;
    }
  }
}

class AllVocabs : public testing::TestWithParam<std::string> {};

// Random ids streamed one at a time never give ill-formed UTF-8, and the
// stream equals decode() with ill-formed bytes replaced.
TEST_P(AllVocabs, StreamingRandomIdsIsValidUtf8) {
  auto tok = load(GetParam());
  std::mt19937 rng(1234);
  const int32_t n = tok->n_vocab();
  // Mostly low ids (bytes and short pieces, where partial characters are), some from anywhere.
  std::uniform_int_distribution<int32_t> any(0, n - 1), low(0, std::min<int32_t>(n - 1, 600));
  for (int round = 0; round < 200; ++round) {
    for (bool special : {false, true}) {
      Ids ids(1 + round % 40);
      for (int32_t& id : ids) id = (rng() % 4 == 0) ? any(rng) : low(rng);
      StreamingDetokenizer stream(*tok, special);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string part = stream.push(id);
        ASSERT_TRUE(utf8_is_valid(part)) << "id " << id;
        EXPECT_LE(stream.pending_bytes(), 3u);
        streamed += part;
      }
      const std::string tail = stream.flush();
      ASSERT_TRUE(utf8_is_valid(tail));
      streamed += tail;
      std::string expected;
      utf8_append_sanitized(tok->decode(ids, special), expected);
      EXPECT_EQ(streamed, expected);
    }
  }
}

// Every vocabulary but the lossy WordPiece one gives the vector inputs back
// (behind the space prefix of SentencePiece vocabs), with or without vectors.
TEST_P(AllVocabs, RoundTripOfVectorInputs) {
  auto tok = load(GetParam());
  if (tok->vocab().model() == "bert") GTEST_SKIP() << "WordPiece lowercases and drops accents";
  const std::string prefix = tok->vocab().add_space_prefix() ? " " : "";
  for (const auto& c : test::load_vectors("ggml-vocab-gpt-2.gguf")) {
    EXPECT_EQ(tok->decode(tok->encode(c.text, false)), c.text.empty() ? "" : prefix + c.text)
        << "'" << printable(c.text) << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerVectors, AllVocabs, testing::ValuesIn(kAll), param_name);

}  // namespace
}  // namespace pagellm
