// The `pagellm` executable on hybrid models (qwen35, qwen35moe): generate on
// the llama.cpp reference file gives its greedy ids, make-model's files run,
// and what the hybrids cannot do yet is refused with one error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace pagellm {
namespace {

using nlohmann::json;
using test::CmdResult;

CmdResult run(const std::string& args) {
  return test::run_command(std::string(PAGELLM_BINARY) + " " + args);
}

std::string q(const std::string& s) { return "'" + s + "'"; }

// generate (default F16 KV cache, as the reference's greedy steps) gives
// llama.cpp's prompt ids and greedy ids up to the first step whose reference
// top-2 margin is under 2e-4 (twice the F32 logit tolerance of the README).
TEST(HybridCli, GenerateGivesLlamaCppGreedyIds) {
  const std::string dir = test::shared_path("golden/arch2026");
  const std::string base = dir + "/rand-qwen35-tok512-F32";
  if (dir.empty() || !std::filesystem::exists(base + ".gguf") ||
      !std::filesystem::exists(base + ".json"))
    GTEST_SKIP() << "../shared/golden/arch2026/rand-qwen35-tok512-F32.gguf/.json absent (or set "
                    "PAGELLM_SHARED)";
  std::ifstream in(base + ".json");
  const json ref = json::parse(in);
  size_t compared = 0;
  for (const auto& c : ref["cases"]) {
    test::TempPath prompt(".txt");
    std::ofstream(prompt.path) << c["prompt"].get<std::string>();
    const auto& greedy = c["greedy"];
    const size_t steps = greedy["ids"].size();
    CmdResult g = run("generate -m " + q(base + ".gguf") + " -f " + q(prompt.path) + " -n " +
                      std::to_string(steps) + " --temp 0 --ignore-eos --json");
    ASSERT_EQ(g.code, 0) << g.err;
    const json out = json::parse(g.out);
    EXPECT_EQ(out["prompt_ids"], c["prompt_ids"]);
    size_t confident = 0;
    for (const auto& s : greedy["top2_per_step"]) {
      if (s["logit1"].get<double>() - s["logit2"].get<double>() < 2e-4) break;
      ++confident;
    }
    ASSERT_EQ(out["output_ids"].size(), steps);
    for (size_t i = 0; i < confident; ++i)
      ASSERT_EQ(out["output_ids"][i], greedy["ids"][i]) << c["prompt_ids"].size() << "-token prompt, step " << i;
    compared += confident;
  }
  EXPECT_GT(compared, 10u);
}

TEST(HybridCli, MakeModelFilesGenerateAndRefuseWhatHybridsCannotDo) {
  for (const char* arch : {"qwen35", "qwen35moe"}) {
    SCOPED_TRACE(arch);
    test::TempPath model(".gguf");
    const std::string moe = std::string(arch) == "qwen35moe" ? "--n-expert 4 " : "";
    CmdResult mk = run(std::string("make-model --arch ") + arch +
                       " --n-embd 64 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 128 --head-dim 32 " +
                       moe + "--full-attention-interval 2 --type q8_0 --vocab-from " +
                       q(test::data_path("stories260K.gguf")) + " -o " + q(model.path));
    ASSERT_EQ(mk.code, 0) << mk.err;
    const std::string m = "generate -m " + q(model.path) + " -p 'Once upon a time' -n 30 --temp 0 --ignore-eos ";
    CmdResult gen = run(m + "--json -c 256");
    ASSERT_EQ(gen.code, 0) << gen.err;
    EXPECT_EQ(json::parse(gen.out)["output_tokens"], 30);
    CmdResult spec = run(m + "--spec-ngram 3");
    EXPECT_EQ(spec.code, 1);
    EXPECT_NE(spec.err.find("error: speculative decoding is not supported for " + std::string(arch)),
              std::string::npos)
        << spec.err;
    CmdResult small = run(m + "--max-batched-tokens 32");
    EXPECT_EQ(small.code, 1);
    EXPECT_NE(small.err.find("error: --max-batched-tokens must be at least 64"), std::string::npos)
        << small.err;
  }
  CmdResult bad = run("make-model --arch qwen35 --n-embd 64 --n-layer 4 --n-head 4 --n-head-kv 2 "
                      "--n-ff 128 --ssm-v-heads 3 --ssm-group-count 2 --vocab-from " +
                      q(test::data_path("stories260K.gguf")) + " -o /tmp/pagellm-never.gguf");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--ssm-v-heads 3 a positive multiple of --ssm-group-count 2"),
            std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace pagellm
