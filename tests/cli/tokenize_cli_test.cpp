// End-to-end tests of `pagellm tokenize`.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace pagellm {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

using test::CmdResult;

CmdResult run_pagellm(const std::string& args) {
  return test::run_command(std::string(PAGELLM_BINARY) + " " + args);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out.push_back(c);
  }
  return out + "'";
}

const std::string kGpt2 = test::data_path("tokenizer-vectors/ggml-vocab-gpt-2.gguf");

json tokenize_json(const std::string& args) {
  const CmdResult r = run_pagellm("tokenize --json " + args);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}

TEST(TokenizeCli, VocabOnlyFileJson) {
  const json j = tokenize_json("-m " + shell_quote(kGpt2) + " --text 'Hello world'");
  EXPECT_EQ(j["ids"], json({15496, 995}));
  EXPECT_EQ(j["pieces"], json({"Hello", " world"}));
}

TEST(TokenizeCli, TextListing) {
  const CmdResult r =
      run_pagellm("tokenize -m " + shell_quote(kGpt2) + " --text " + shell_quote("Hi\n"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "  17250 -> 'Hi'\n    198 -> '\\n'\n");
}

TEST(TokenizeCli, BosAndSpecialTokens) {
  // The shipped SPM model adds BOS unless --no-bos.
  EXPECT_EQ(tokenize_json("-p 'Once upon a time'")["ids"], json({1, 403, 407, 261, 378}));
  EXPECT_EQ(tokenize_json("--no-bos -p 'Once upon a time'")["ids"], json({403, 407, 261, 378}));
  const std::string eot = "-m " + shell_quote(kGpt2) + " --text 'a<|endoftext|>'";
  EXPECT_EQ(tokenize_json(eot + " --parse-special")["ids"], json({64, 50256}));
  EXPECT_EQ(tokenize_json(eot + " --parse-special")["pieces"], json({"a", "<|endoftext|>"}));
  EXPECT_GT(tokenize_json(eot)["ids"].size(), 2u);
}

TEST(TokenizeCli, FileAndStdin) {
  test::TempPath path(".txt");
  test::write_file(path.path, "Hello world");
  EXPECT_EQ(tokenize_json("-m " + shell_quote(kGpt2) + " -f " + shell_quote(path.path))["ids"],
            json({15496, 995}));
  const CmdResult r =
      run_pagellm("tokenize --json -m " + shell_quote(kGpt2) + " < " + shell_quote(path.path));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ids"], json({15496, 995}));
}

// Partial characters show as \xNN, exactly like the golden file's pieces.
TEST(TokenizeCli, MatchesGoldenPromptPieces) {
  const std::string base = "golden/random/rand-llama-gpt2bpe3k-Q8_0";
  std::ifstream in(test::data_path(base + ".json"));
  const json doc = json::parse(in);
  for (const json& c : doc["cases"]) {
    const json j = tokenize_json("-m " + shell_quote(test::data_path(base + ".gguf")) + " --text " +
                                 shell_quote(c["prompt"].get<std::string>()));
    EXPECT_EQ(j["ids"], c["prompt_ids"]) << c["name"];
    EXPECT_EQ(j["pieces"], c["prompt_pieces"]) << c["name"];
  }
}

TEST(TokenizeCli, Errors) {
  test::TempPath path(".txt");
  test::write_file(path.path, "x");
  const CmdResult both = run_pagellm("tokenize --text a -f " + shell_quote(path.path));
  EXPECT_NE(both.code, 0);
  const CmdResult missing = run_pagellm("tokenize -m /nonexistent/x.gguf --text a");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("error:"), std::string::npos) << missing.err;
  const CmdResult help = run_pagellm("tokenize --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--parse-special"), std::string::npos);
}

}  // namespace
}  // namespace pagellm
