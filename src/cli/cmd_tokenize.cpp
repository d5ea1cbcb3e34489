// pagellm tokenize: print the token ids and pieces of a text. Reads only the
// GGUF metadata (tokenizer.* keys), never the weights, so vocab-only files work.
//
// Pieces are token_to_piece(id, special=true); a byte that is not part of a
// well-formed UTF-8 character (a token may hold half of one) is shown as the
// four characters \xNN, as Python's "backslashreplace" does.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/read_file.h"
#include "util/strings.h"

namespace pagellm::cli {

namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  std::string file;
  bool text_set = false;  // --text given, possibly empty
  bool no_bos = false;
  bool parse_special = false;
  bool json = false;
};

// Well-formed UTF-8 as is; each byte of an ill-formed part as \xNN.
std::string show_bytes(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const Utf8Scan scan = utf8_scan(s.substr(i));
    if (scan.kind == Utf8Scan::Kind::kValid) {
      out.append(s.substr(i, scan.length));
    } else {
      for (size_t k = 0; k < scan.length; ++k)
        out += fmt::format("\\x{:02x}", static_cast<uint8_t>(s[i + k]));
    }
    i += scan.length;
  }
  return out;
}

// For the text listing: also control characters escaped, so one token is one line.
std::string show_escaped(std::string_view s) {
  std::string out;
  for (char c : show_bytes(s)) {
    const auto byte = static_cast<uint8_t>(c);
    if (const std::string_view e = whitespace_escape(byte); !e.empty())
      out += e;
    else if (byte < 0x20 || byte == 0x7F)
      out += fmt::format("\\x{:02x}", byte);
    else
      out.push_back(c);
  }
  return out;
}

std::string read_input(const TokenizeArgs& a) {
  if (!a.file.empty()) return read_whole_file(a.file);
  if (a.text_set) return a.text;
  return std::string(std::istreambuf_iterator<char>(std::cin), {});
}

int run_tokenize(const TokenizeArgs& a) {
  auto file = GgufFile::open(a.model.empty() ? default_model_path() : a.model);
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer->vocab().warning().empty())
    std::fprintf(stderr, "warning: %s\n", tokenizer->vocab().warning().c_str());
  const std::string text = read_input(a);
  const std::vector<int32_t> ids = tokenizer->encode(text, !a.no_bos, a.parse_special);
  if (a.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(show_bytes(tokenizer->token_to_piece(id, true)));
    nlohmann::json j;
    j["ids"] = ids;
    j["pieces"] = pieces;
    std::puts(j.dump().c_str());
    return 0;
  }
  for (int32_t id : ids)
    fmt::print("{:>7} -> '{}'\n", id, show_escaped(tokenizer->token_to_piece(id, true)));
  return 0;
}

}  // namespace

Runner add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Print the token ids and pieces of a text (reads only the vocabulary)");
  sub->add_option("-m,--model", a->model,
                  "GGUF file, vocab-only files included (default: the model shipped in the repo)");
  CLI::Option* text = sub->add_option("-p,--text,--prompt", a->text, "Text to tokenize");
  CLI::Option* file = sub->add_option("-f,--file", a->file, "Tokenize this file's contents");
  text->excludes(file);
  sub->add_flag("--no-bos", a->no_bos, "Add no BOS/EOS, even where the vocabulary asks for them");
  sub->add_flag("--parse-special", a->parse_special,
                "Match the text of control tokens (e.g. <|endoftext|>) in the input");
  sub->add_flag("--json", a->json, "Print one JSON object {\"ids\": [...], \"pieces\": [...]}");
  sub->footer(
      "Without --text or --file the text is read from standard input. Pieces show bytes that are "
      "not part of a whole UTF-8 character as \\xNN.");
  return [a, text] {
    a->text_set = text->count() > 0;
    return run_tokenize(*a);
  };
}

}  // namespace pagellm::cli
