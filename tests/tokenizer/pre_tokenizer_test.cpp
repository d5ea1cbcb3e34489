#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/unicode_regex.h"
#include "util/error.h"

namespace pagellm {
namespace {

using Words = std::vector<std::string>;

Words split(const std::string& pre, const std::string& text) {
  const PreTokenizer p = PreTokenizer::for_name(pre);
  Words out;
  for (std::string_view w : p.split(text)) out.emplace_back(w);
  return out;
}

std::vector<std::pair<size_t, size_t>> matches(const std::string& pattern, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  UnicodeRegex(pattern).for_each_match(text, [&](size_t b, size_t e) { out.emplace_back(b, e); });
  return out;
}

TEST(UnicodeRegex, UnicodeClasses) {
  // \s matches U+3000 IDEOGRAPHIC SPACE; \p{N} matches ARABIC-INDIC DIGIT THREE.
  EXPECT_EQ(matches(R"(\s+)",
                    "a\xE3\x80\x80"
                    "b"),
            (std::vector<std::pair<size_t, size_t>>{{1, 4}}));
  EXPECT_EQ(matches(R"(\p{N}+)",
                    "x\xD9\xA3"
                    "7"),
            (std::vector<std::pair<size_t, size_t>>{{1, 4}}));
  EXPECT_EQ(matches(R"(\p{L}+)", "\xD0\x91\xD0\xB3!"),
            (std::vector<std::pair<size_t, size_t>>{{0, 4}}));
}

TEST(UnicodeRegex, DollarOnlyAtTheEnd) {
  EXPECT_TRUE(matches(R"(a$)", "a\n").empty());
  EXPECT_EQ(matches(R"(\s+$)", "a \n"), (std::vector<std::pair<size_t, size_t>>{{1, 3}}));
}

TEST(UnicodeRegex, EmptyMatchesAreSkipped) {
  EXPECT_EQ(matches("x*", "axxb\xC3\xA9"), (std::vector<std::pair<size_t, size_t>>{{1, 3}}));
  EXPECT_TRUE(matches("x*", "").empty());
}

TEST(UnicodeRegex, BadPatternThrows) {
  EXPECT_THROW(UnicodeRegex("[a-"), ConfigError);
  EXPECT_THROW(UnicodeRegex(R"(\p{Nope})"), ConfigError);
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world's 123  x\n"),
            (Words{"Hello", " world", "'s", " 123", " ", " x", "\n"}));
  EXPECT_EQ(split("gpt-2", "I'M ok"), (Words{"I", "'", "M", " ok"}));  // case-sensitive
  EXPECT_EQ(split("gpt-2", "a\tb"), (Words{"a", "\t", "b"}));
  EXPECT_EQ(split("gpt-2", "!!! ??"), (Words{"!!!", " ??"}));
}

// Unnamed and "default" BPE vocabularies: the reference's default chain of
// splits, punctuation runs first, then GPT-2's, then digit runs, then triples.
TEST(PreTokenizer, DefaultSplitsPunctuationFirst) {
  EXPECT_EQ(split("", "Hello world's"), (Words{"Hello", " world", "'", "s"}));
  EXPECT_EQ(split("default", "a 12"), (Words{"a", " ", "12"}));
  EXPECT_EQ(split("", "x 12345"), (Words{"x", " ", "123", "45"}));
  EXPECT_EQ(split("", "ok!? yes"), (Words{"ok", "!?", " yes"}));
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(split("llama-bpe", "12345 abc"), (Words{"123", "45", " abc"}));
  EXPECT_EQ(split("llama3", "Hello\n\nworld"), (Words{"Hello", "\n\n", "world"}));
  EXPECT_EQ(split("llama3", "I'M (ok)"), (Words{"I", "'M", " (", "ok", ")"}));
  EXPECT_EQ(split("llama3", "x  y "), (Words{"x", " ", " y", " "}));
  EXPECT_TRUE(PreTokenizer::for_name("llama-bpe").ignore_merges());
  EXPECT_FALSE(PreTokenizer::for_name("dbrx").ignore_merges());
}

TEST(PreTokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split("qwen2", "x12345"), (Words{"x", "1", "2", "3", "4", "5"}));
}

TEST(PreTokenizer, StarcoderFamilySplitsEveryDigit) {
  for (const char* pre : {"starcoder", "refact", "command-r", "smollm"}) {
    EXPECT_EQ(split(pre, " 123 ab"), (Words{" ", "1", "2", "3", " ab"})) << pre;
  }
}

TEST(PreTokenizer, Falcon) {
  EXPECT_EQ(split("falcon", "a,b 12345"), (Words{"a", ",", "b", " ", "123", "45"}));
}

TEST(PreTokenizer, DeepseekCoder) {
  EXPECT_EQ(split("deepseek-coder", "ab 12\n"), (Words{"ab", " ", "1", "2", "\n"}));
}

TEST(PreTokenizer, DeepseekLlm) {
  EXPECT_EQ(split("deepseek-llm", "ab  \n"), (Words{"ab", "  ", "\n"}));
  // "数字123": a CJK run, then a digit run.
  EXPECT_EQ(split("deepseek-llm",
                  "\xE6\x95\xB0\xE5\xAD\x97"
                  "123"),
            (Words{"\xE6\x95\xB0\xE5\xAD\x97", "123"}));
  // Greek " Ωμέγα" is one letter run with its space.
  EXPECT_EQ(split("deepseek-llm", " \xCE\xA9\xCE\xBC\xCE\xAD\xCE\xB3\xCE\xB1!"),
            (Words{" \xCE\xA9\xCE\xBC\xCE\xAD\xCE\xB3\xCE\xB1", "!"}));
  // Later regexes cut inside earlier matches: U+2126 OHM SIGN is a letter to
  // the second regex, but also inside the U+0800..U+4E00 range of the fifth.
  EXPECT_EQ(split("deepseek-llm", " \xCE\xB1\xE2\x84\xA6"), (Words{" \xCE\xB1", "\xE2\x84\xA6"}));
}

TEST(PreTokenizer, Bloom) {
  EXPECT_EQ(split("bloom", "Hello, world"), (Words{"Hello", ",", " world"}));
}

TEST(PreTokenizer, TekkenSplitsByCase) {
  EXPECT_EQ(split("tekken", "HelloWorld ABCdef 12"),
            (Words{"Hello", "World", " ABCdef", " ", "1", "2"}));
}

TEST(PreTokenizer, UnknownNameThrows) {
  try {
    PreTokenizer::for_name("nonsense");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "unknown BPE pre-tokenizer 'nonsense'");
  }
}

TEST(PreTokenizer, DefaultBos) {
  EXPECT_TRUE(PreTokenizer::adds_bos_by_default("llama-bpe"));
  EXPECT_TRUE(PreTokenizer::adds_bos_by_default("tekken"));
  EXPECT_FALSE(PreTokenizer::adds_bos_by_default("gpt-2"));
  EXPECT_FALSE(PreTokenizer::adds_bos_by_default("qwen2"));
  EXPECT_FALSE(PreTokenizer::adds_bos_by_default("nonsense"));
}

// Every pre-tokenizer keeps every byte: words are non-empty and concatenate
// to the text, on random mixes of scripts, digits, spaces and punctuation.
TEST(PreTokenizer, WordsCoverTheText) {
  const std::vector<std::string> alphabet = {"a",
                                             "Z",
                                             "7",
                                             " ",
                                             "  ",
                                             "\n",
                                             "\r\n",
                                             "\t",
                                             "'s",
                                             "'LL",
                                             ",",
                                             "...",
                                             "$",
                                             "`",
                                             "\xC3\xA9",
                                             "\xD0\x96",
                                             "\xE6\x97\xA5",
                                             "\xEA\xB0\x80",
                                             "\xE3\x80\x80",
                                             "\xEF\xBC\x81",
                                             "\xF0\x9F\x99\x82",
                                             "\xD9\xA3",
                                             "\xCC\x81",
                                             "<sentinel:3>",
                                             "IMGIMGABZ"};
  std::mt19937 rng(7);
  for (const std::string& name : PreTokenizer::known_names()) {
    const PreTokenizer p = PreTokenizer::for_name(name);
    for (int round = 0; round < 50; ++round) {
      std::string text;
      const int n = static_cast<int>(rng() % 30);
      for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
      std::string joined;
      for (std::string_view w : p.split(text)) {
        EXPECT_FALSE(w.empty()) << name;
        joined += w;
      }
      EXPECT_EQ(joined, text) << name;
    }
  }
}

}  // namespace
}  // namespace pagellm
