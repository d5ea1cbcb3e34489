#include "tokenizer/pre_tokenizer.h"

#include <utility>

#include "util/error.h"

namespace pagellm {

namespace {

// GPT-2's regex. Hugging Face's has a last alternative `|\s+`; it is not needed
// here because text no alternative matches is kept as a word anyway (it can
// only be one whitespace character before a non-space).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// The reference's split for a BPE vocab that names no pre-tokenizer (older
// conversions): punctuation runs first (so "'s" is two words), then GPT-2's.
constexpr const char* kDefaultPunct = R"([\p{P}\$\+<=>\^~\|]+)";

// Llama 3's regex; the contractions are spelled out case by case, as
// llama.cpp does, instead of (?i:...) (which would also fold e.g. "ſ" to "s").
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2's: Llama 3's with single digits.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's cased letters (a subset of Lu/Ll/Lt), with an optional
// leading space.
constexpr const char* kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";

// ASCII punctuation and symbols, their full-width forms, curly quotes, and the
// ideographic space, comma and full stop.
constexpr const char* kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

// CJK unified ideographs U+4E00..U+9FA5, U+0800..U+4E00, Hangul U+AC00..U+D7FF.
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

constexpr const char* kBloom =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";

struct Preset {
  std::vector<std::string_view> names;
  std::vector<std::string> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = {
      {{"", "default"}, {kDefaultPunct, kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "gigachat",
        "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "jina-es", "jina-de"},
       {kGpt2}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1"}, {kLlama3}, true, true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {kQwen2}},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
      {{"deepseek-v3"},
       {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|)"
        R"( ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}},
      {{"bloom", "poro-chat", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, R"(\p{N})"}},
      {{"tekken"},
       {R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
        R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
        R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true,
       true},
      {{"chameleon"},
       {R"(<sentinel:[0-9]+>)", R"((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)", R"(([\t\n]|    |  ))",
        R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
       false,
       true},
  };
  return kPresets;
}

const Preset* find_preset(std::string_view pre) {
  for (const Preset& p : presets()) {
    for (std::string_view name : p.names)
      if (name == pre) return &p;
  }
  return nullptr;
}

}  // namespace

PreTokenizer PreTokenizer::for_name(std::string_view pre) {
  const Preset* p = find_preset(pre);
  if (p == nullptr) throw ConfigError("unknown BPE pre-tokenizer '" + std::string(pre) + "'");
  return PreTokenizer(p->patterns, p->ignore_merges);
}

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> out;
  for (const Preset& p : presets()) {
    for (std::string_view name : p.names) out.emplace_back(name);
  }
  return out;
}

bool PreTokenizer::adds_bos_by_default(std::string_view pre) {
  const Preset* p = find_preset(pre);
  return p != nullptr && p->add_bos;
}

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns, bool ignore_merges)
    : ignore_merges_(ignore_merges) {
  regexes_.reserve(patterns.size());
  for (const std::string& p : patterns) regexes_.emplace_back(p);
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  // Pieces as [begin, end) offsets into `text`.
  std::vector<std::pair<size_t, size_t>> pieces, next;
  if (text.empty()) return {};
  pieces.emplace_back(0, text.size());
  for (const UnicodeRegex& re : regexes_) {
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const auto& piece : pieces) {
      // Plain names: lambdas capturing structured bindings need clang 16.
      const size_t begin = piece.first, end = piece.second;
      size_t done = begin;
      re.for_each_match(text.substr(begin, end - begin), [&](size_t b, size_t e) {
        if (begin + b > done) next.emplace_back(done, begin + b);
        next.emplace_back(begin + b, begin + e);
        done = begin + e;
      });
      if (done < end) next.emplace_back(done, end);
    }
    pieces.swap(next);
  }
  std::vector<std::string_view> words;
  words.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) words.push_back(text.substr(begin, end - begin));
  return words;
}

}  // namespace pagellm
