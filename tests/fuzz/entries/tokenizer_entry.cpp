// Random bytes through every shipped vocabulary.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string_view>

#include "entries/fuzz_entries.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace pagellm::fuzz {

namespace {

// Every vocabulary under tests/data that this engine can load, sorted by file name.
const std::vector<std::unique_ptr<Tokenizer>>& vocabs() {
  static const std::vector<std::unique_ptr<Tokenizer>> v = [] {
    std::vector<std::string> paths = {std::string(PAGELLM_TEST_DATA) + "/stories260K.gguf"};
    for (const auto& e :
         std::filesystem::directory_iterator(std::string(PAGELLM_TEST_DATA) + "/tokenizer-vectors"))
      if (e.path().extension() == ".gguf") paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    std::vector<std::unique_ptr<Tokenizer>> toks;
    for (const auto& p : paths) {
      try {
        toks.push_back(Tokenizer::from_gguf(*GgufFile::open(p)));
      } catch (const Error&) {  // an algorithm not supported yet
      }
    }
    if (toks.empty()) violated("no vocabulary found under tests/data");
    return toks;
  }();
  return v;
}

}  // namespace

int tokenizer(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto& toks = vocabs();
  const Tokenizer& tok = *toks[data[0] % toks.size()];
  const bool add_special = data[1] & 1, parse_special = data[1] & 2, render_special = data[1] & 4;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(text, add_special, parse_special);
  } catch (const Error&) {
    return 0;
  }
  for (int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) violated("encode gave an id outside the vocabulary");
  const std::string decoded = tok.decode(ids, render_special);
  // Streaming only ever gives well-formed UTF-8, the same bytes as decode()
  // when that is well-formed.
  StreamingDetokenizer detok(tok, render_special);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.push(id);
  streamed += detok.flush();
  if (!utf8_is_valid(streamed)) violated("streaming detokenization gave ill-formed UTF-8");
  if (utf8_is_valid(decoded) && streamed != decoded)
    violated("streaming detokenization differs from decode()");
  // Lossless vocabularies give plain text back (behind the SentencePiece
  // space prefix), unless a character had no token (<unk>). SentencePiece
  // writes spaces as U+2581, so a U+2581 of the text comes back as a space,
  // and prefixes a space after every special token (as llama.cpp does): the
  // check is for text without special tokens.
  const bool spm = tok.vocab().model() == "llama";
  const auto fragments = tok.split_special(text, false);
  const bool plain = std::all_of(fragments.begin(), fragments.end(),
                                 [](const auto& f) { return f.token == kNoToken; });
  if (!add_special && !parse_special && plain && tok.vocab().model() != "bert" &&
      utf8_is_valid(text) && !(spm && text.find("\xe2\x96\x81") != std::string_view::npos) &&
      std::find(ids.begin(), ids.end(), tok.vocab().unk()) == ids.end()) {
    const std::string prefix = tok.vocab().add_space_prefix() && !text.empty() ? " " : "";
    if (tok.decode(ids) != prefix + std::string(text)) violated("decode(encode(text)) != text");
  }
  // Arbitrary ids (from the input bytes) decode without error.
  for (size_t i = 2; i + 1 < size && i < 64; i += 2)
    (void)tok.token_to_piece((data[i] | data[i + 1] << 8) % tok.n_vocab(), render_special);
  return 0;
}

}  // namespace pagellm::fuzz
