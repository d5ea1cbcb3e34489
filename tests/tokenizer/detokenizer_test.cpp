#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "support/test_support.h"
#include "tokenizer/tiny_vocab.h"
#include "tokenizer/utf8.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;
const std::string kU = "\xE2\x96\x81";  // "▁"
constexpr int32_t kByte0 = 3;           // id of <0x00> in the tiny vocabulary

std::string stream_all(const Tokenizer& tok, const Ids& ids, bool special = false) {
  StreamingDetokenizer s(tok, special);
  std::string out;
  for (int32_t id : ids) {
    const std::string part = s.push(id);
    EXPECT_TRUE(utf8_is_valid(part)) << "id " << id;
    out += part;
  }
  return out + s.flush();
}

TEST(Detokenizer, PiecesByTokenType) {
  Vocab::Spec s = test::tiny_spec({{kU + "hi" + kU, 0}});
  s.tokens.push_back("<tool>");
  s.scores.push_back(0);
  s.types.push_back(TokenType::kUserDefined);
  s.tokens.push_back("<unused0>");
  s.scores.push_back(0);
  s.types.push_back(TokenType::kUnused);
  auto tok = Tokenizer::create(Vocab(s));
  EXPECT_EQ(tok->token_to_piece(259), " hi ");
  EXPECT_EQ(tok->token_to_piece(kByte0 + 0x0A), "\n");
  EXPECT_EQ(tok->token_to_piece(kByte0 + 0xE2), "\xE2");
  EXPECT_EQ(tok->token_to_piece(260), "<tool>");
  EXPECT_EQ(tok->token_to_piece(261), "");
  EXPECT_EQ(tok->token_to_piece(261, true), "");
  for (int32_t id : {0, 1, 2}) {
    EXPECT_EQ(tok->token_to_piece(id), "") << id;
    EXPECT_EQ(tok->token_to_piece(id, true), tok->vocab().text(id)) << id;
  }
  EXPECT_EQ(tok->decode(Ids{1, 259, kByte0 + 'x', 2}), " hi x");
  EXPECT_EQ(tok->decode(Ids{1, 259, 2}, true), "<s> hi </s>");
  EXPECT_THROW(tok->token_to_piece(262), std::out_of_range);
  EXPECT_THROW(tok->token_to_piece(-1), std::out_of_range);
}

TEST(StreamingDetokenizer, EmojiThroughByteTokens) {
  auto tok = Tokenizer::create(Vocab(test::tiny_spec({{kU + "hi", 0}})));
  // "🙂" = F0 9F 99 82, "é" = C3 A9, one byte token each.
  const Ids ids = {259,           kByte0 + 0xF0, kByte0 + 0x9F, kByte0 + 0x99,
                   kByte0 + 0x82, kByte0 + 0xC3, kByte0 + 0xA9, 259};
  StreamingDetokenizer s(*tok);
  EXPECT_EQ(s.push(ids[0]), " hi");
  EXPECT_EQ(s.push(ids[1]), "");
  EXPECT_EQ(s.push(ids[2]), "");
  EXPECT_EQ(s.push(ids[3]), "");
  EXPECT_EQ(s.pending_bytes(), 3u);
  EXPECT_EQ(s.push(ids[4]), "\xF0\x9F\x99\x82");
  EXPECT_EQ(s.push(ids[5]), "");
  EXPECT_EQ(s.push(ids[6]), "\xC3\xA9");
  EXPECT_EQ(s.push(ids[7]), " hi");
  EXPECT_EQ(s.flush(), "");
  EXPECT_EQ(stream_all(*tok, ids), tok->decode(ids));
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementCharacters) {
  auto tok = Tokenizer::create(Vocab(test::tiny_spec({{"a", 0}})));
  const std::string fffd(kUtf8Replacement);
  StreamingDetokenizer s(*tok);
  // A stray continuation byte is replaced at once.
  EXPECT_EQ(s.push(kByte0 + 0x80), fffd);
  // A lead byte waits; the next byte shows it was never going to complete.
  EXPECT_EQ(s.push(kByte0 + 0xE2), "");
  EXPECT_EQ(s.push(259), fffd + "a");
  EXPECT_EQ(s.pending_bytes(), 0u);
  // A truncated character at the end comes out of flush() as one U+FFFD.
  EXPECT_EQ(s.push(kByte0 + 0xF0), "");
  EXPECT_EQ(s.push(kByte0 + 0x9F), "");
  EXPECT_EQ(s.flush(), fffd);
  EXPECT_EQ(s.pending_bytes(), 0u);
  // Bytes that can never start a character (C0, F5..FF) are not held.
  EXPECT_EQ(s.push(kByte0 + 0xC0), fffd);
  EXPECT_EQ(s.push(kByte0 + 0xFF), fffd);
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// The golden greedy texts, streamed one id at a time: well-formed text comes out
// unchanged; ill-formed bytes (random-weight models emit stray byte tokens) come
// out sanitized.
TEST(StreamingDetokenizer, GoldenGreedyTexts) {
  for (const char* name : {"stories260K", "golden/random/rand-qwen2-tok512-F32",
                           "golden/random/rand-llama-spm32k-Q4_0"}) {
    const std::string base = name;
    const std::string gguf = base + ".gguf";
    const std::string js = base == "stories260K" ? "golden/stories260K.json" : base + ".json";
    auto file = GgufFile::open(test::data_path(gguf));
    auto tok = Tokenizer::from_gguf(*file);
    std::ifstream in(test::data_path(js));
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& c : doc["cases"]) {
      const Ids ids = c["greedy"]["ids"].get<Ids>();
      const std::string bytes = from_hex(c["greedy"]["text_hex"].get<std::string>());
      std::string sanitized;
      utf8_append_sanitized(bytes, sanitized);
      EXPECT_EQ(stream_all(*tok, ids), sanitized) << name;
      // And the prompt, encoded then streamed back (with the BOS rendering empty).
      const std::string prompt = c["prompt"].get<std::string>();
      const std::string back = stream_all(*tok, tok->encode(prompt));
      EXPECT_EQ(back, prompt.empty() ? "" : " " + prompt) << name;
    }
  }
}

}  // namespace
}  // namespace pagellm
