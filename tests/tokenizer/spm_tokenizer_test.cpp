#include "tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "support/test_support.h"
#include "tokenizer/tiny_vocab.h"
#include "util/error.h"

namespace pagellm {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

json load_json(const std::string& rel) {
  std::ifstream in(test::data_path(rel));
  return json::parse(in);
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& rel) {
  auto file = GgufFile::open(test::data_path(rel));
  return Tokenizer::from_gguf(*file);
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Every case of a golden JSON: prompt ids with BOS, and the bytes of the greedy text.
void check_golden(const std::string& gguf, const std::string& json_rel) {
  SCOPED_TRACE(json_rel);
  auto tok = load_tokenizer(gguf);
  const json doc = load_json(json_rel);
  ASSERT_FALSE(doc["cases"].empty());
  for (const json& c : doc["cases"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    EXPECT_EQ(tok->encode(c["prompt"].get<std::string>(), true), c["prompt_ids"].get<Ids>());
    const Ids ids = c["greedy"]["ids"].get<Ids>();
    EXPECT_EQ(tok->decode(ids), from_hex(c["greedy"]["text_hex"].get<std::string>()));
    if (c["greedy"].contains("pieces")) {
      const auto pieces = c["greedy"]["pieces"].get<std::vector<std::string>>();
      ASSERT_EQ(pieces.size(), ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        const std::string piece = tok->token_to_piece(ids[i], true);
        // Single bytes of partial characters are printed as \xNN in the JSON.
        if (piece.size() == 1 && static_cast<uint8_t>(piece[0]) >= 0x80) continue;
        EXPECT_EQ(piece, pieces[i]) << "id " << ids[i];
      }
    }
  }
}

TEST(SpmGolden, Stories260K) {
  check_golden("stories260K.gguf", "golden/stories260K.json");
}

TEST(SpmGolden, RandomTok512AndSpm32k) {
  for (const char* name :
       {"rand-llama-tok512-F32", "rand-llama-tok512-F16", "rand-llama-tok512-Q8_0",
        "rand-llama-tok512-Q4_0", "rand-llama-tok512-Q4_K", "rand-llama-tok512-Q6_K",
        "rand-qwen2-tok512-F32", "rand-qwen2-tok512-Q8_0", "rand-llama-spm32k-Q4_0"}) {
    const std::string base = std::string("golden/random/") + name;
    check_golden(base + ".gguf", base + ".json");
  }
}

// tests/data/tokenizer-vectors: every input string is followed by the separator;
// the .out file has one line of " id id ..." per input.
TEST(SpmVectors, LlamaSpm) {
  const std::string base = "tokenizer-vectors/ggml-vocab-llama-spm.gguf";
  auto tok = load_tokenizer(base);
  const std::string inp = test::read_file(test::data_path(base + ".inp"));
  const std::string out = test::read_file(test::data_path(base + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";

  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(sep, pos);
    ASSERT_NE(end, std::string::npos) << "input not terminated by the separator";
    inputs.push_back(inp.substr(pos, end - pos));
    pos = end + sep.size();
  }
  std::vector<Ids> expected;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    Ids ids;
    std::istringstream nums(line);
    for (int32_t id; nums >> id;) ids.push_back(id);
    expected.push_back(ids);
  }
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(tok->encode(inputs[i], false), expected[i])
        << "case " << i << ": '" << inputs[i] << "'";
  }
  // The facts the README spells out.
  EXPECT_EQ(tok->encode(" ", false), (Ids{259}));
  EXPECT_EQ(tok->encode("\n", false), (Ids{29871, 13}));
  EXPECT_EQ(tok->encode("", false), Ids{});
  EXPECT_EQ(tok->encode("", true), (Ids{1}));
}

// decode(encode(x)) gives back x behind the space prefix, on a long mixed text
// (the vector inputs, repeated to about 200 KB).
TEST(SpmVectors, LongTextRoundTrip) {
  const std::string base = "tokenizer-vectors/ggml-vocab-llama-spm.gguf";
  auto tok = load_tokenizer(base);
  const std::string inp = test::read_file(test::data_path(base + ".inp"));
  std::string text;
  while (text.size() < 200000) text += inp;
  const Ids ids = tok->encode(text, false);
  EXPECT_LT(ids.size(), text.size());
  EXPECT_EQ(tok->decode(ids), " " + text);
}

// Tiny vocabulary: "▁" = U+2581.
const std::string kU = "\xE2\x96\x81";

TEST(SpmTokenizer, HighestScoreMergesFirst) {
  Vocab::Spec s = test::tiny_spec({{"a", 0}, {"b", 0}, {"c", 0}, {"ab", 1}, {"bc", 2}});
  s.add_space_prefix = false;
  auto tok = Tokenizer::create(Vocab(s));
  const int32_t a = 259, c = 261, ab = 262, bc = 263;
  EXPECT_EQ(tok->encode("abc", false), (Ids{a, bc}));
  EXPECT_EQ(tok->encode("ab", false), (Ids{ab}));
  EXPECT_EQ(tok->encode("cab", false), (Ids{c, ab}));
}

TEST(SpmTokenizer, TiesMergeTheLeftmostPair) {
  Vocab::Spec s = test::tiny_spec({{"a", 0}, {"aa", 1}});
  s.add_space_prefix = false;
  auto tok = Tokenizer::create(Vocab(s));
  EXPECT_EQ(tok->encode("aaa", false), (Ids{260, 259}));
  EXPECT_EQ(tok->encode("aaaa", false), (Ids{260, 260}));
}

TEST(SpmTokenizer, SpacePrefixAndEscaping) {
  auto tok = Tokenizer::create(
      Vocab(test::tiny_spec({{kU, 0}, {"a", 0}, {kU + "a", 1}, {kU + kU, 0.5f}})));
  const int32_t u = 259, a = 260, ua = 261, uu = 262;
  EXPECT_EQ(tok->encode("a", false), (Ids{ua}));
  EXPECT_EQ(tok->encode("a", true), (Ids{1, ua}));
  EXPECT_EQ(tok->encode(" a", false), (Ids{u, ua}));  // "▁▁a": ▁a scores higher than ▁▁
  EXPECT_EQ(tok->encode("a ", false), (Ids{ua, u}));
  EXPECT_EQ(tok->encode("  ", false), (Ids{uu, u}));
  EXPECT_EQ(tok->encode("", false), Ids{});  // no lone prefix
  EXPECT_EQ(tok->encode("", true), (Ids{1}));
  (void)a;
}

TEST(SpmTokenizer, ByteFallback) {
  auto tok = Tokenizer::create(Vocab(test::tiny_spec({{kU, 0}, {"a", 0}})));
  // "é" = C3 A9 is not a token: one <0xXX> token per byte.
  EXPECT_EQ(tok->encode("aé", false), (Ids{259, 260, 3 + 0xC3, 3 + 0xA9}));
  // Characters are cut by lead bytes alone: FF claims up to 4 bytes, so "\xFF" "a" is one
  // piece, not a token, and falls back to bytes as a whole (as llama.cpp does).
  EXPECT_EQ(tok->encode("\xFF"
                        "a",
                        false),
            (Ids{259, 3 + 0xFF, 3 + 'a'}));
  EXPECT_EQ(tok->encode("a\xFF", false), (Ids{259, 260, 3 + 0xFF}));
}

TEST(SpmTokenizer, UnknownWithoutByteTokens) {
  Vocab::Spec s = test::tiny_spec({{kU, 0}, {"a", 0}, {"z", 0}}, /*with_bytes=*/false);
  auto tok = Tokenizer::create(Vocab(s));
  // Without byte tokens: the one-byte text when it is a token, else UNK per byte.
  EXPECT_EQ(tok->encode("a\xC3\xA9z", false), (Ids{3, 4, 0, 0, 5}));
}

TEST(SpmTokenizer, NoByteTokenAndNoUnkThrows) {
  Vocab::Spec s = test::tiny_spec({{kU, 0}, {"a", 0}}, /*with_bytes=*/false);
  s.unk = kNoToken;
  auto tok = Tokenizer::create(Vocab(s));
  EXPECT_THROW(tok->encode("b", false), FormatError);
}

TEST(SpmTokenizer, SpecialTokensParsedOnlyWhenAsked) {
  auto tok = Tokenizer::create(Vocab(test::tiny_spec({{kU, 0}, {"a", 0}, {kU + "a", 1}})));
  const int32_t u = 259, ua = 261;
  // parse_special=false: "<s>" is plain text, here all bytes.
  const Ids plain = tok->encode("<s>a", false);
  EXPECT_EQ(plain.front(), u);
  EXPECT_EQ(plain.size(), 5u);
  // parse_special=true: the control token is matched; the text after it gets a prefix again.
  EXPECT_EQ(tok->encode("<s>a", false, true), (Ids{1, ua}));
  EXPECT_EQ(tok->encode("a</s>", true, true), (Ids{1, ua, 2}));
  EXPECT_EQ(tok->encode("a<s>a", false, true), (Ids{ua, 1, ua}));
  EXPECT_EQ(tok->encode("<unk>", false, true), (Ids{0}));
}

TEST(SpmTokenizer, UserDefinedTokensAreAlwaysMatched) {
  Vocab::Spec s = test::tiny_spec({{kU, 0}, {"a", 0}, {kU + "a", 1}});
  s.tokens.push_back("<tool>");
  s.scores.push_back(0);
  s.types.push_back(TokenType::kUserDefined);
  auto tok = Tokenizer::create(Vocab(s));
  EXPECT_EQ(tok->encode("a<tool>a", false), (Ids{261, 262, 261}));
  EXPECT_EQ(tok->token_to_piece(262), "<tool>");
}

// Phi-3's added tokens swallow the whitespace after them (their upstream
// "rstrip" flag): "</s>" (USER_DEFINED, always matched) followed by spaces or
// newlines tokenizes as "</s>" and the text alone, with no extra "▁" token.
TEST(SpmTokenizer, Phi3AddedTokensStripWhitespaceAfterThem) {
  auto phi3 = load_tokenizer("tokenizer-vectors/ggml-vocab-phi-3.gguf");
  const int32_t eos_text = phi3->vocab().find("</s>");
  ASSERT_EQ(phi3->vocab().type(eos_text), TokenType::kUserDefined);
  EXPECT_TRUE(phi3->vocab().rstrip(eos_text));
  for (const char* bare : {"<unk>", "<s>", "<|endoftext|>"})
    EXPECT_FALSE(phi3->vocab().rstrip(phi3->vocab().find(bare))) << bare;
  const Ids hello = phi3->encode("hello", false);
  auto with = [&](Ids head, const Ids& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  for (const char* text : {"</s>hello", "</s> hello", "</s>\n\nhello", "</s> \t\r\nhello"})
    EXPECT_EQ(phi3->encode(text, false), with({eos_text}, hello)) << text;
  // Whitespace before the token stays.
  EXPECT_EQ(phi3->encode("hi </s>", false), with(phi3->encode("hi ", false), {eos_text}));
  // The chat template's newlines after control tokens are swallowed too.
  const int32_t user = phi3->vocab().find("<|user|>"), end = phi3->vocab().find("<|end|>"),
                assistant = phi3->vocab().find("<|assistant|>");
  EXPECT_EQ(phi3->encode("<|user|>\nHi<|end|>\n<|assistant|>\n", false, true),
            with(with({user}, phi3->encode("Hi", false)), {end, assistant}));
  // Other SentencePiece vocabularies keep the whitespace.
  auto llama = load_tokenizer("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  EXPECT_FALSE(llama->vocab().rstrip(llama->vocab().find("</s>")));
  EXPECT_EQ(llama->encode("</s> hello", false, true),
            with({llama->vocab().find("</s>")}, llama->encode(" hello", false)));
}

TEST(SpmTokenizer, SplitSpecialPrefersLongerTokens) {
  Vocab::Spec s = test::tiny_spec({});
  for (const char* t : {"<a>", "<a><b>"}) {
    s.tokens.push_back(t);
    s.scores.push_back(0);
    s.types.push_back(TokenType::kControl);
  }
  auto tok = Tokenizer::create(Vocab(s));
  const auto frags = tok->split_special("x<a><b>y<a>", true);
  ASSERT_EQ(frags.size(), 4u);
  EXPECT_EQ(frags[0].text, "x");
  EXPECT_EQ(frags[1].token, 260);
  EXPECT_EQ(frags[2].text, "y");
  EXPECT_EQ(frags[3].token, 259);
  EXPECT_EQ(tok->split_special("x<a>", false).size(), 1u);
}

TEST(Tokenizer, UnsupportedModels) {
  for (const char* model : {"rwkv", "ugm"}) {
    Vocab::Spec s;
    s.model = model;
    s.tokens = {"a", "b"};
    s.bos = kNoToken;
    s.eos = kNoToken;
    s.unk = kNoToken;
    s.add_bos = false;
    try {
      Tokenizer::create(Vocab(s));
      ADD_FAILURE() << model;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("tokenizer model '") + model + "' is not supported yet");
    }
  }
}

TEST(Tokenizer, FacadeAccessors) {
  auto tok = load_tokenizer("stories260K.gguf");
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_FALSE(tok->is_eog(kNoToken));
}

}  // namespace
}  // namespace pagellm
