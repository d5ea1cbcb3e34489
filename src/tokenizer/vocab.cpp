#include "tokenizer/vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

#include "gguf/gguf_reader.h"
#include "tokenizer/pre_tokenizer.h"
#include "util/enum_names.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr const char* kKeyModel = "tokenizer.ggml.model";
constexpr const char* kKeyPre = "tokenizer.ggml.pre";
constexpr const char* kKeyTokens = "tokenizer.ggml.tokens";
constexpr const char* kKeyScores = "tokenizer.ggml.scores";
constexpr const char* kKeyTypes = "tokenizer.ggml.token_type";
constexpr const char* kKeyMerges = "tokenizer.ggml.merges";
constexpr const char* kKeyBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kKeyEos = "tokenizer.ggml.eos_token_id";
constexpr const char* kKeyUnk = "tokenizer.ggml.unknown_token_id";
constexpr const char* kKeySep = "tokenizer.ggml.seperator_token_id";  // sic, as written by gguf-py
constexpr const char* kKeyPad = "tokenizer.ggml.padding_token_id";
constexpr const char* kKeyEot = "tokenizer.ggml.eot_token_id";
constexpr const char* kKeyEom = "tokenizer.ggml.eom_token_id";
constexpr const char* kKeyAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char* kKeyAddEos = "tokenizer.ggml.add_eos_token";
constexpr const char* kKeyAddSep = "tokenizer.ggml.add_sep_token";
constexpr const char* kKeyCls = "tokenizer.ggml.cls_token_id";
constexpr const char* kKeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
constexpr const char* kKeyFimPre = "tokenizer.ggml.fim_pre_token_id";
constexpr const char* kKeyFimSuf = "tokenizer.ggml.fim_suf_token_id";
constexpr const char* kKeyFimMid = "tokenizer.ggml.fim_mid_token_id";
constexpr const char* kKeyFimPad = "tokenizer.ggml.fim_pad_token_id";
constexpr const char* kKeyFimRep = "tokenizer.ggml.fim_rep_token_id";
constexpr const char* kKeyFimSep = "tokenizer.ggml.fim_sep_token_id";
// The keys older conversions wrote for the first three.
constexpr const char* kKeyOldPrefix = "tokenizer.ggml.prefix_token_id";
constexpr const char* kKeyOldSuffix = "tokenizer.ggml.suffix_token_id";
constexpr const char* kKeyOldMiddle = "tokenizer.ggml.middle_token_id";

// Fill-in-the-middle token texts of common code models (Qwen 2.5 Coder,
// StarCoder, DeepSeek Coder, CodeLlama, CodeGemma, GLM), used when the file
// names no id, as llama.cpp looks them up.
constexpr std::array<std::string_view, 7> kFimPreTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>"};
constexpr std::array<std::string_view, 7> kFimSufTexts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>"};
constexpr std::array<std::string_view, 7> kFimMidTexts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>"};
constexpr std::array<std::string_view, 4> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                                          "<PAD>"};
constexpr std::array<std::string_view, 5> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>",
                                                          "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSepTexts = {"<|file_sep|>"};

// Texts that mark the end of a turn in common chat vocabularies.
constexpr std::array<std::string_view, 7> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
};

struct ModelDefaults {
  int32_t bos, eos, unk, sep;
  bool add_bos, add_sep, add_space_prefix;
};

ModelDefaults defaults_for(const std::string& model) {
  if (model == "llama") return {1, 2, 0, kNoToken, true, false, true};
  if (model == "gpt2") return {11, 11, kNoToken, kNoToken, false, false, false};
  if (model == "bert") return {101, kNoToken, 100, 102, true, true, false};
  return {kNoToken, kNoToken, kNoToken, kNoToken, false, false, false};
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xXX>" -> XX, else -1.
int parse_byte_text(const std::string& s) {
  if (s.size() != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
  const int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

std::string byte_text(uint8_t b) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  return std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
}

}  // namespace

const char* token_type_name(TokenType t) {
  static constexpr std::array<const char*, 7> kNames = {
      "UNDEFINED", "NORMAL", "UNKNOWN", "CONTROL", "USER_DEFINED", "UNUSED", "BYTE"};
  static_assert(names_cover(TokenType::kByte, kNames));
  return enum_name(t, kNames);
}

Vocab::Vocab(Spec spec, const std::string& source) {
  auto fail = [&](const std::string& msg) { throw FormatError(source + ": " + msg); };

  model_ = std::move(spec.model);
  pre_ = std::move(spec.pre);
  tokens_ = std::move(spec.tokens);
  merges_ = std::move(spec.merges);
  if (model_.empty()) fail(fmt::format("'{}' is empty", kKeyModel));
  if (model_ == "gpt2" && pre_.empty())
    warning_ = fmt::format(
        "{}: no '{}' key (an older conversion): using the default pre-tokenizer (punctuation "
        "split off first, as the reference does), not GPT-2's",
        source, kKeyPre);
  if (tokens_.empty()) fail(fmt::format("'{}' has no tokens", kKeyTokens));
  if (tokens_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail(fmt::format("'{}' has too many tokens ({})", kKeyTokens, tokens_.size()));
  }
  const size_t n = tokens_.size();

  if (spec.scores.empty()) {
    scores_.assign(n, 0.0f);
  } else if (spec.scores.size() != n) {
    fail(fmt::format("'{}' has {} entries but '{}' has {}", kKeyScores, spec.scores.size(),
                     kKeyTokens, n));
  } else {
    scores_ = std::move(spec.scores);
  }

  if (spec.types.empty()) {
    types_.assign(n, TokenType::kNormal);
  } else if (spec.types.size() != n) {
    fail(fmt::format("'{}' has {} entries but '{}' has {}", kKeyTypes, spec.types.size(),
                     kKeyTokens, n));
  } else {
    types_ = std::move(spec.types);
    for (size_t i = 0; i < n; ++i) {
      const auto t = static_cast<int32_t>(types_[i]);
      if (t < 0 || t > static_cast<int32_t>(TokenType::kByte)) {
        fail(fmt::format("'{}'[{}] is {}, not a token type (0..6)", kKeyTypes, i, t));
      }
    }
  }

  byte_values_.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (tokens_[i].empty()) tokens_[i] = fmt::format("[EMPTY_{}]", i);
    by_text_[tokens_[i]] = static_cast<int32_t>(i);  // a later duplicate wins
    if (types_[i] == TokenType::kByte) {
      const int v = parse_byte_text(tokens_[i]);
      if (v < 0 && model_ == "llama") {
        fail(fmt::format("'{}'[{}] is a BYTE token but is spelled '{}', not '<0xXX>'", kKeyTokens,
                         i, tokens_[i]));
      }
      byte_values_[i] = static_cast<int16_t>(v);
    }
  }
  for (int b = 0; b < 256; ++b) byte_tokens_[b] = find(byte_text(static_cast<uint8_t>(b)));

  ModelDefaults def = defaults_for(model_);
  if (model_ == "gpt2" && PreTokenizer::adds_bos_by_default(pre_)) def.add_bos = true;
  auto special = [&](const std::optional<int32_t>& given, int32_t fallback, const char* key) {
    const int32_t id = given.value_or(fallback);
    if (id == kNoToken) return kNoToken;
    if (id < 0 || id >= n_tokens()) {
      fail(fmt::format("'{}' is {}, outside the vocabulary ({} tokens)", key, id, n));
    }
    return id;
  };
  // A default id that the vocabulary is too small for means "none".
  auto fit = [&](int32_t id) { return contains(id) ? id : kNoToken; };
  bos_ = special(spec.bos, fit(def.bos), kKeyBos);
  eos_ = special(spec.eos, fit(def.eos), kKeyEos);
  unk_ = special(spec.unk, fit(def.unk), kKeyUnk);
  sep_ = special(spec.sep, fit(def.sep), kKeySep);
  pad_ = special(spec.pad, kNoToken, kKeyPad);
  eot_ = special(spec.eot, kNoToken, kKeyEot);
  eom_ = special(spec.eom, kNoToken, kKeyEom);
  // FIM: the id the file gives, else the first token spelled like one.
  auto fim = [&](const std::optional<int32_t>& given, const auto& texts, const char* key) {
    if (given) return special(given, kNoToken, key);
    for (std::string_view t : texts)
      if (const int32_t id = find(t); id != kNoToken) return id;
    return kNoToken;
  };
  fim_pre_ = fim(spec.fim_pre, kFimPreTexts, kKeyFimPre);
  fim_suf_ = fim(spec.fim_suf, kFimSufTexts, kKeyFimSuf);
  fim_mid_ = fim(spec.fim_mid, kFimMidTexts, kKeyFimMid);
  fim_pad_ = fim(spec.fim_pad, kFimPadTexts, kKeyFimPad);
  fim_rep_ = fim(spec.fim_rep, kFimRepTexts, kKeyFimRep);
  fim_sep_ = fim(spec.fim_sep, kFimSepTexts, kKeyFimSep);
  add_bos_ = spec.add_bos.value_or(def.add_bos);
  add_eos_ = spec.add_eos.value_or(false);
  add_sep_ = spec.add_sep.value_or(def.add_sep && sep_ != kNoToken);
  add_space_prefix_ = spec.add_space_prefix.value_or(def.add_space_prefix);
  if (add_bos_ && bos_ == kNoToken)
    fail(fmt::format("'{}' is set but there is no BOS token", kKeyAddBos));
  if (add_eos_ && eos_ == kNoToken)
    fail(fmt::format("'{}' is set but there is no EOS token", kKeyAddEos));
  if (add_sep_ && sep_ == kNoToken)
    fail(fmt::format("'{}' is set but there is no SEP token", kKeyAddSep));

  for (int32_t id : {eos_, eot_, eom_}) {
    if (id != kNoToken) eog_ids_.push_back(id);
  }
  for (std::string_view text : kEogTexts) {
    const int32_t id = find(text);
    if (id == kNoToken) continue;
    eog_ids_.push_back(id);
    types_[id] = TokenType::kControl;
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());

  for (int32_t id = 0; id < n_tokens(); ++id) {
    const TokenType t = types_[id];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      special_tokens_.push_back(id);
    }
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].size() > tokens_[b].size(); });
  rstrip_.assign(tokens_.size(), false);
  for (int32_t id : spec.rstrip) {
    if (!contains(id)) fail(fmt::format("rstrip token {} is outside the vocabulary", id));
    rstrip_[id] = true;
  }
}

int32_t Vocab::find(std::string_view text) const {
  const auto it = by_text_.find(text);
  return it == by_text_.end() ? kNoToken : it->second;
}

int32_t Vocab::byte_token(uint8_t byte) const {
  return byte_tokens_[byte];
}

int Vocab::byte_value(int32_t id) const {
  return contains(id) ? byte_values_[id] : -1;
}

std::string Vocab::verbatim_piece(int32_t id, bool special) const {
  switch (type(id)) {  // range-checked
    case TokenType::kUserDefined:
      return text(id);
    case TokenType::kControl:
    case TokenType::kUnknown:
      return special ? text(id) : std::string();
    default:
      return std::string();
  }
}

bool Vocab::is_eog(int32_t id) const {
  return id != kNoToken && std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

namespace {

const GgufValue* find_array(const GgufFile& file, const char* key, bool required) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) {
    if (required) throw FormatError(fmt::format("{}: missing required key '{}'", file.path(), key));
    return nullptr;
  }
  if (v->type() != GgufType::ARRAY) {
    throw FormatError(fmt::format("{}: '{}' must be an array, not {}", file.path(), key,
                                  gguf_type_name(v->type())));
  }
  return v;
}

void expect_elements(const GgufFile& file, const GgufValue& arr, const char* key, bool ok,
                     const char* wanted) {
  if (!ok) {
    throw FormatError(fmt::format("{}: '{}' must be an array of {}, not of {}", file.path(), key,
                                  wanted, gguf_type_name(arr.elem_type())));
  }
}

std::vector<std::string> read_strings(const GgufFile& file, const char* key, bool required) {
  std::vector<std::string> out;
  const GgufValue* v = find_array(file, key, required);
  if (v == nullptr) return out;
  expect_elements(file, *v, key, v->elem_type() == GgufType::STRING, "str");
  const auto& elems = v->as_array(key);
  out.reserve(elems.size());
  for (const GgufValue& e : elems) out.push_back(e.as_str(key));
  return out;
}

std::optional<int32_t> read_id(const GgufFile& file, const char* key) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) {
    throw FormatError(fmt::format("{}: '{}' must be an integer, not {}", file.path(), key,
                                  gguf_type_name(v->type())));
  }
  const int64_t id = v->as_i64(key);
  if (id == -1 || id == 0xFFFFFFFFll) return kNoToken;
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
    throw FormatError(fmt::format("{}: '{}' is {}, not a token id", file.path(), key, id));
  }
  return static_cast<int32_t>(id);
}

bool is_phi3(const GgufFile& file) {
  if (file.get_str("general.architecture").value_or("") == "phi3") return true;
  std::string name = file.get_str("general.name").value_or("");
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
}

// The tokens Phi-3's upstream tokenizer.json marks rstrip: its added tokens
// (typed CONTROL or USER_DEFINED here) except <unk>, <s> and <|endoftext|>.
std::vector<int32_t> phi3_rstrip_tokens(const Vocab::Spec& spec) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < spec.tokens.size() && id < spec.types.size(); ++id) {
    const TokenType t = spec.types[id];
    if (t != TokenType::kControl && t != TokenType::kUserDefined) continue;
    const std::string& text = spec.tokens[id];
    if (text == "<unk>" || text == "<s>" || text == "<|endoftext|>") continue;
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

}  // namespace

Vocab Vocab::from_gguf(const GgufFile& file) {
  Spec spec;
  spec.model = file.require_str(kKeyModel);
  spec.pre = file.get_str(kKeyPre).value_or("");
  spec.tokens = read_strings(file, kKeyTokens, true);
  spec.merges = read_strings(file, kKeyMerges, false);

  if (const GgufValue* v = find_array(file, kKeyScores, false)) {
    expect_elements(file, *v, kKeyScores,
                    v->elem_type() == GgufType::FLOAT32 || v->elem_type() == GgufType::FLOAT64,
                    "f32");
    for (const GgufValue& e : v->as_array(kKeyScores)) {
      spec.scores.push_back(static_cast<float>(e.as_f64(kKeyScores)));
    }
    if (spec.scores.empty() && !spec.tokens.empty()) {
      throw FormatError(fmt::format("{}: '{}' has 0 entries but '{}' has {}", file.path(),
                                    kKeyScores, kKeyTokens, spec.tokens.size()));
    }
  }
  if (const GgufValue* v = find_array(file, kKeyTypes, false)) {
    expect_elements(file, *v, kKeyTypes,
                    v->elem_type() == GgufType::INT32 || v->elem_type() == GgufType::UINT32, "i32");
    for (const GgufValue& e : v->as_array(kKeyTypes)) {
      const int64_t t = e.as_i64(kKeyTypes);
      if (t < std::numeric_limits<int32_t>::min() || t > std::numeric_limits<int32_t>::max()) {
        throw FormatError(fmt::format("{}: '{}'[{}] is {}, not a token type (0..6)", file.path(),
                                      kKeyTypes, spec.types.size(), t));
      }
      // Other values outside 0..6 are reported by the Vocab constructor.
      spec.types.push_back(static_cast<TokenType>(t));
    }
    if (spec.types.empty() && !spec.tokens.empty()) {
      throw FormatError(fmt::format("{}: '{}' has 0 entries but '{}' has {}", file.path(),
                                    kKeyTypes, kKeyTokens, spec.tokens.size()));
    }
  }

  spec.bos = read_id(file, kKeyBos);
  if (!spec.bos) spec.bos = read_id(file, kKeyCls);
  spec.eos = read_id(file, kKeyEos);
  spec.unk = read_id(file, kKeyUnk);
  spec.sep = read_id(file, kKeySep);
  spec.pad = read_id(file, kKeyPad);
  spec.eot = read_id(file, kKeyEot);
  spec.eom = read_id(file, kKeyEom);
  spec.fim_pre = read_id(file, kKeyFimPre);
  if (!spec.fim_pre) spec.fim_pre = read_id(file, kKeyOldPrefix);
  spec.fim_suf = read_id(file, kKeyFimSuf);
  if (!spec.fim_suf) spec.fim_suf = read_id(file, kKeyOldSuffix);
  spec.fim_mid = read_id(file, kKeyFimMid);
  if (!spec.fim_mid) spec.fim_mid = read_id(file, kKeyOldMiddle);
  spec.fim_pad = read_id(file, kKeyFimPad);
  spec.fim_rep = read_id(file, kKeyFimRep);
  spec.fim_sep = read_id(file, kKeyFimSep);
  spec.add_bos = file.get_bool(kKeyAddBos);
  spec.add_eos = file.get_bool(kKeyAddEos);
  spec.add_sep = file.get_bool(kKeyAddSep);
  spec.add_space_prefix = file.get_bool(kKeyAddSpacePrefix);
  if (spec.model == "llama" && is_phi3(file)) spec.rstrip = phi3_rstrip_tokens(spec);
  return Vocab(std::move(spec), file.path());
}

}  // namespace pagellm
