#include "tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "support/test_support.h"
#include "tokenizer/tiny_vocab.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace pagellm {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load(const std::string& rel) {
  auto file = GgufFile::open(test::data_path(rel));
  return Tokenizer::from_gguf(*file);
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Python's bytes.decode("utf-8", "backslashreplace"): each byte of an
// ill-formed part as \xNN.
std::string backslash_replace(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const Utf8Scan scan = utf8_scan(s.substr(i));
    if (scan.kind == Utf8Scan::Kind::kValid) {
      out.append(s.substr(i, scan.length));
    } else {
      for (size_t k = 0; k < scan.length; ++k) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<uint8_t>(s[i + k]));
        out += buf;
      }
    }
    i += scan.length;
  }
  return out;
}

std::vector<std::string> pieces(const Tokenizer& tok, const Ids& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(tok.token_to_piece(id, true));
  return out;
}

// The 3072-token GPT-2 cut: prompt ids (no BOS: the vocab does not ask for
// one), prompt pieces, and the greedy continuation's text and pieces.
TEST(BpeGolden, RandGpt2Bpe3k) {
  const std::string base = "golden/random/rand-llama-gpt2bpe3k-Q8_0";
  auto tok = load(base + ".gguf");
  EXPECT_EQ(tok->n_vocab(), 3072);
  EXPECT_FALSE(tok->vocab().add_bos());
  std::ifstream in(test::data_path(base + ".json"));
  const json doc = json::parse(in);
  ASSERT_EQ(doc["cases"].size(), 3u);
  for (const json& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string prompt = c["prompt"].get<std::string>();
    const Ids ids = tok->encode(prompt, /*add_special=*/true);
    EXPECT_EQ(ids, c["prompt_ids"].get<Ids>());
    std::vector<std::string> shown;
    for (const std::string& p : pieces(*tok, ids)) shown.push_back(backslash_replace(p));
    EXPECT_EQ(shown, c["prompt_pieces"].get<std::vector<std::string>>());
    EXPECT_EQ(tok->decode(ids), prompt);

    const Ids greedy = c["greedy"]["ids"].get<Ids>();
    EXPECT_EQ(tok->decode(greedy), from_hex(c["greedy"]["text_hex"].get<std::string>()));
    shown.clear();
    for (const std::string& p : pieces(*tok, greedy)) shown.push_back(backslash_replace(p));
    EXPECT_EQ(shown, c["greedy"]["pieces"].get<std::vector<std::string>>());
  }
}

// Tiny vocabulary: id b is the token of byte b, then one token per merge.
constexpr int32_t kFirstMerge = 256;

std::unique_ptr<Tokenizer> tiny(const std::vector<std::pair<std::string, std::string>>& merges,
                                const std::string& pre = "gpt-2") {
  return Tokenizer::create(Vocab(test::tiny_bpe_spec(merges, pre)));
}

TEST(BpeTokenizer, LowestRankMergesFirst) {
  auto tok = tiny({{"a", "b"}, {"b", "c"}});
  const int32_t ab = kFirstMerge, bc = kFirstMerge + 1;
  EXPECT_EQ(tok->encode("abc", false), (Ids{ab, 'c'}));
  auto tok2 = tiny({{"b", "c"}, {"a", "b"}});
  EXPECT_EQ(tok2->encode("abc", false), (Ids{'a', kFirstMerge}));
  (void)bc;
}

TEST(BpeTokenizer, TiesMergeTheLeftmostPair) {
  auto tok = tiny({{"a", "a"}});
  const int32_t a = 'a', aa = kFirstMerge;
  EXPECT_EQ(tok->encode("aaa", false), (Ids{aa, a}));
  EXPECT_EQ(tok->encode("aaaa", false), (Ids{aa, aa}));
}

TEST(BpeTokenizer, MergesChainWithinWordsOnly) {
  auto tok = tiny({{" ", "h"}, {" h", "i"}, {"h", "i"}});
  const int32_t space_hi = kFirstMerge + 1, hi = kFirstMerge + 2;
  // " hi" is one word; "hi hi" is the words "hi" and " hi".
  EXPECT_EQ(tok->encode(" hi", false), (Ids{space_hi}));
  EXPECT_EQ(tok->encode("hi hi", false), (Ids{hi, space_hi}));
  EXPECT_EQ(tok->decode(Ids{hi, space_hi}), "hi hi");
}

// 200000 equal bytes in one word, with merges doubling the length each time:
// the heap makes this O(n log n); a quadratic BPE would take minutes.
TEST(BpeTokenizer, LongWordIsNotQuadratic) {
  std::vector<std::pair<std::string, std::string>> merges;
  std::string run = "a";
  for (int i = 0; i < 10; ++i, run += run) merges.emplace_back(run, run);  // up to 1024 a's
  auto tok = tiny(merges);
  const std::string text(200000, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = tok->encode(text, false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);
  // 200000 = 195 * 1024 + 320 = 195 * 1024 + 256 + 64.
  ASSERT_EQ(ids.size(), 197u);
  EXPECT_EQ(ids.front(), kFirstMerge + 9);
  EXPECT_EQ(ids[195], kFirstMerge + 7);
  EXPECT_EQ(ids[196], kFirstMerge + 5);
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(BpeTokenizer, IllFormedUtf8BecomesReplacementCharacters) {
  auto tok = tiny({});
  // One U+FFFD (EF BF BD) per byte of each ill-formed part.
  const Ids one = tok->encode(std::string(kUtf8Replacement), false);
  ASSERT_EQ(one.size(), 3u);
  Ids two = one;
  two.insert(two.end(), one.begin(), one.end());
  EXPECT_EQ(tok->encode("\xFF", false), one);
  EXPECT_EQ(tok->encode("\xE2\x82", false), two);  // truncated at the end: both bytes
  Ids mixed = {'a'};
  mixed.insert(mixed.end(), one.begin(), one.end());
  mixed.push_back('b');
  EXPECT_EQ(tok->encode("a\xC0"
                        "b",
                        false),
            mixed);
}

TEST(BpeTokenizer, MergeResultOutsideTheVocabFallsBackToBytes) {
  Vocab::Spec s = test::tiny_bpe_spec({{"a", "b"}});
  s.merges.push_back("x y");  // "xy" is not a token
  auto tok = Tokenizer::create(Vocab(s));
  EXPECT_EQ(tok->encode("xyab", false), (Ids{'x', 'y', kFirstMerge}));
}

TEST(BpeTokenizer, MalformedMergeThrows) {
  for (const char* bad : {"ab", "a ", ""}) {
    Vocab::Spec s = test::tiny_bpe_spec({});
    s.merges.push_back(bad);
    EXPECT_THROW(Tokenizer::create(Vocab(s)), FormatError) << "'" << bad << "'";
  }
}

TEST(BpeTokenizer, UnknownPreTokenizerThrows) {
  EXPECT_THROW(tiny({}, "nonsense"), ConfigError);
}

// llama3-style: a word that is a token is emitted whole, even where the merges
// would not build it.
TEST(BpeTokenizer, IgnoreMergesForWholeTokens) {
  Vocab::Spec s = test::tiny_bpe_spec({{"a", "b"}}, "llama-bpe");
  s.tokens.insert(s.tokens.end() - 1, "abc");  // before <|endoftext|>
  s.types.insert(s.types.end() - 1, TokenType::kNormal);
  s.bos = s.eos = static_cast<int32_t>(s.tokens.size() - 1);
  auto tok = Tokenizer::create(Vocab(s));
  EXPECT_EQ(tok->encode("abc", false), (Ids{kFirstMerge + 1}));
  EXPECT_EQ(tok->encode("abd", false), (Ids{kFirstMerge, 'd'}));
  // And llama-bpe vocabs add BOS by default.
  EXPECT_EQ(tok->encode("abc", true), (Ids{kFirstMerge + 2, kFirstMerge + 1}));

  s.pre = "gpt-2";
  auto plain = Tokenizer::create(Vocab(s));
  EXPECT_EQ(plain->encode("abc", true), (Ids{kFirstMerge, 'c'}));
}

TEST(BpeTokenizer, PiecesByTokenType) {
  Vocab::Spec s = test::tiny_bpe_spec({{" ", "h"}});
  s.tokens.insert(s.tokens.end() - 1, {"<tool>", "  ", "<0x41>", "<unused>"});
  s.types.insert(s.types.end() - 1, {TokenType::kUserDefined, TokenType::kUserDefined,
                                     TokenType::kByte, TokenType::kUnused});
  const auto eot = static_cast<int32_t>(s.tokens.size() - 1);
  s.bos = s.eos = eot;
  auto tok = Tokenizer::create(Vocab(s));
  EXPECT_EQ(tok->token_to_piece(kFirstMerge), " h");
  EXPECT_EQ(tok->token_to_piece('\n'), "\n");    // "Ċ"
  EXPECT_EQ(tok->token_to_piece(0xE9), "\xE9");  // half of a character
  EXPECT_EQ(tok->token_to_piece(kFirstMerge + 1), "<tool>");
  EXPECT_EQ(tok->token_to_piece(kFirstMerge + 2), "  ");
  EXPECT_EQ(tok->token_to_piece(kFirstMerge + 3), "");
  EXPECT_EQ(tok->token_to_piece(kFirstMerge + 4), "");
  EXPECT_EQ(tok->token_to_piece(eot), "");
  EXPECT_EQ(tok->token_to_piece(eot, true), "<|endoftext|>");
  EXPECT_THROW(tok->token_to_piece(eot + 1), std::out_of_range);
  // User-defined tokens are matched in text, control tokens only with parse_special.
  EXPECT_EQ(tok->encode("a<tool>b", false), (Ids{'a', kFirstMerge + 1, 'b'}));
  EXPECT_EQ(tok->encode("<|endoftext|>", false).size(), 13u);
  EXPECT_EQ(tok->encode("<|endoftext|>", false, true), (Ids{eot}));
  EXPECT_EQ(tok->decode(tok->encode("x  <tool> h\n", false)), "x  <tool> h\n");
}

TEST(BpeVocabs, SpecialTokensAndBos) {
  auto gpt2 = load("tokenizer-vectors/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(gpt2->encode("Hello", true), (Ids{15496}));  // no BOS
  EXPECT_EQ(gpt2->encode("Hello<|endoftext|>", false, true), (Ids{15496, 50256}));
  EXPECT_EQ(gpt2->decode(Ids{15496, 50256}), "Hello");
  EXPECT_EQ(gpt2->decode(Ids{15496, 50256}, true), "Hello<|endoftext|>");
  EXPECT_TRUE(gpt2->is_eog(50256));

  auto ds = load("tokenizer-vectors/ggml-vocab-deepseek-llm.gguf");
  const Ids ids = ds->encode("Hello", true);  // add_bos_token = true in the file
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 100000);
}

// Vocabularies without reference vectors: their pre-tokenizers' digit rules
// show in the pieces, and text round-trips.
TEST(BpeVocabs, FalconAndDeepseekCoderDigits) {
  auto falcon = load("tokenizer-vectors/ggml-vocab-falcon.gguf");
  const std::string text = "x 12345678, a+b";
  const Ids f = falcon->encode(text, false);
  EXPECT_EQ(falcon->decode(f), text);
  std::string joined;
  for (const std::string& p : pieces(*falcon, f)) {
    if (!p.empty() && p[0] >= '0' && p[0] <= '9') joined += "[" + p + "]";
  }
  EXPECT_EQ(joined, "[123][456][78]");

  auto coder = load("tokenizer-vectors/ggml-vocab-deepseek-coder.gguf");
  const Ids c = coder->encode(text, false);
  EXPECT_EQ(coder->decode(c), text);
  joined.clear();
  for (const std::string& p : pieces(*coder, c)) {
    if (!p.empty() && p[0] >= '0' && p[0] <= '9') joined += "[" + p + "]";
  }
  EXPECT_EQ(joined, "[1][2][3][4][5][6][7][8]");
  EXPECT_EQ(coder->encode("", true), (Ids{32013}));  // add_bos_token = true
}

}  // namespace
}  // namespace pagellm
