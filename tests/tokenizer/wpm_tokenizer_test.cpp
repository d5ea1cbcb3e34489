#include "tokenizer/wpm_tokenizer.h"

#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> bge() {
  auto file = GgufFile::open(test::data_path("tokenizer-vectors/ggml-vocab-bert-bge.gguf"));
  return Tokenizer::from_gguf(*file);
}

// Ids in the bert-bge (uncased BERT) vocabulary.
constexpr int32_t kUnk = 100, kCls = 101, kSep = 102;

TEST(WpmTokenizer, ClsAndSep) {
  auto tok = bge();
  EXPECT_EQ(tok->bos_id(), kCls);
  EXPECT_TRUE(tok->vocab().add_sep());
  EXPECT_EQ(tok->encode("hello", true), (Ids{kCls, 7592, kSep}));
  EXPECT_EQ(tok->encode("hello", false), (Ids{7592}));
  EXPECT_EQ(tok->encode("", true), (Ids{kCls, kSep}));
}

TEST(WpmTokenizer, NormalizesCaseAccentsAndPunctuation) {
  auto tok = bge();
  // Lowercased, accents dropped, punctuation split off.
  EXPECT_EQ(tok->encode("Hello, W\xC3\xB6rld!", false), (Ids{7592, 1010, 2088, 999}));
  EXPECT_EQ(tok->encode("hello , world !", false), (Ids{7592, 1010, 2088, 999}));
  // Control characters vanish; any whitespace separates.
  EXPECT_EQ(tok->encode("hel\xE2\x80\x8Dlo\xE3\x80\x80world", false), (Ids{7592, 2088}));
  // CJK ideographs are words of their own.
  EXPECT_EQ(tok->encode("\xE6\x97\xA5\xE6\x9C\xAC", false), (Ids{1864, 1876}));
}

TEST(WpmTokenizer, ContinuationPieces) {
  auto tok = bge();
  const Ids ids = tok->encode("F\xC3\xBChrer", false);  // "Führer" -> "▁fu" "hrer"
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok->vocab().text(ids[0]),
            "\xE2\x96\x81"
            "fu");
  EXPECT_EQ(tok->vocab().text(ids[1]), "hrer");
  EXPECT_EQ(tok->decode(ids), " fuhrer");
}

TEST(WpmTokenizer, UnknownWords) {
  auto tok = bge();
  EXPECT_EQ(tok->encode("\xF0\x9F\x9A\x80", false), (Ids{kUnk}));  // 🚀
  EXPECT_EQ(tok->encode(std::string(WpmTokenizer::kMaxWordChars, 'a'), false).size() > 1, true);
  EXPECT_EQ(tok->encode(std::string(WpmTokenizer::kMaxWordChars + 1, 'a'), false), (Ids{kUnk}));
  // An uncoverable word is one UNK, its neighbours are unaffected.
  EXPECT_EQ(tok->encode("hello \xF0\x9F\x9A\x80x world", false), (Ids{7592, kUnk, 2088}));
}

TEST(WpmTokenizer, SpecialTokensAndPieces) {
  auto tok = bge();
  EXPECT_EQ(tok->encode("a[SEP]b", false, true), (Ids{1037, kSep, 1038}));
  EXPECT_NE(tok->encode("a[SEP]b", false, false), (Ids{1037, kSep, 1038}));
  EXPECT_EQ(tok->token_to_piece(kCls), "");
  EXPECT_EQ(tok->token_to_piece(kCls, true), "[CLS]");
  EXPECT_EQ(tok->decode(Ids{kCls, 7592, 1010, 2088, kSep}), " hello , world");
}

TEST(WpmTokenizer, NeedsAnUnkToken) {
  Vocab::Spec s;
  s.model = "bert";
  s.tokens = {"a", "b"};
  s.unk = kNoToken;
  s.bos = kNoToken;
  s.sep = kNoToken;
  s.add_bos = false;
  EXPECT_THROW(Tokenizer::create(Vocab(s)), FormatError);
}

}  // namespace
}  // namespace pagellm
