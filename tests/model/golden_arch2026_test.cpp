// The 2026 architecture goldens: llama.cpp references for random-weight
// models in ../shared/golden/arch2026 (see its README). They are read from
// there only, never packed into tests/data (the repository stays small): each
// case skips, saying why, when the folder or file is absent or when its
// general.architecture is not implemented yet. A new file is one line below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "model/registry.h"
#include "model/golden_util.h"

namespace pagellm {
namespace {

using nlohmann::json;
using namespace golden;

struct Arch2026Case {
  const char* file;  // without .gguf / .json
  const char* arch;  // its general.architecture
  double tol;        // the README's tolerance for an exact implementation
};

class GoldenArch2026 : public ::testing::TestWithParam<Arch2026Case> {};

void check_case(const Arch2026Case& ac) {
  const std::string dir = test::shared_path("golden/arch2026");
  if (dir.empty())
    GTEST_SKIP() << "../shared/golden/arch2026 is absent (or set PAGELLM_SHARED): " << ac.file
                 << " not checked";
  const std::string gguf = dir + "/" + ac.file + ".gguf", ref = dir + "/" + ac.file + ".json";
  if (!std::filesystem::exists(gguf) || !std::filesystem::exists(ref))
    GTEST_SKIP() << ac.file << ".gguf/.json is not in " << dir;
  // Checked before the file is opened: it may hold tensor types that come
  // with the family (gpt-oss: MXFP4).
  if (!lookup_architecture(ac.arch))
    GTEST_SKIP() << ac.file << ": unknown architecture '" << ac.arch << "' (not implemented yet)";

  const json g = load_json_file(ref);
  auto model = ModelRunner::load(gguf);
  ASSERT_EQ(model->hparams().arch, ac.arch);
  auto tok = Tokenizer::from_gguf(model->file());
  ThreadPool pool(2);
  double worst = 0;
  size_t compared = 0, steps = 0;
  ASSERT_FALSE(g["cases"].empty());
  for (const auto& c : g["cases"]) {
    const std::string what =
        std::string(ac.file) + " (" + std::to_string(c["prompt_ids"].size()) + " tokens)";
    const ArchCaseResult r = run_arch_case(*model, *tok, c, ac.tol, pool, what);
    EXPECT_LT(r.logit_err, ac.tol) << what;
    worst = std::max(worst, r.logit_err);
    compared += r.compared;
    steps += r.steps;
  }
  std::printf("%s: max |logit - llama.cpp| = %.3g (tolerance %.g); greedy %zu/%zu steps compared\n",
              ac.file, worst, ac.tol, compared, steps);
}

TEST_P(GoldenArch2026, LastLogitsAndGreedy) { check_case(GetParam()); }

// MLA's plain form (model/mla_block.h; off by default) for every prompt
// position: the same references within the same tolerance.
TEST(GoldenArch2026Mla, PlainFormPromptsMeetTheGolden) {
  struct Env {
    Env() { setenv("PAGELLM_MLA_PLAIN_MIN_PROMPT", "0", 1); }
    ~Env() { unsetenv("PAGELLM_MLA_PLAIN_MIN_PROMPT"); }
  } env;
  check_case({"rand-deepseek2-tok512-F32", "deepseek2", 1e-4});
}

// One line per file; the tolerances are the README's.
INSTANTIATE_TEST_SUITE_P(
    Families2026, GoldenArch2026,
    ::testing::Values(Arch2026Case{"rand-smollm3-tok512-Q8_0", "smollm3", 5e-2},
                      Arch2026Case{"rand-qwen35-tok512-F32", "qwen35", 1e-4},
                      Arch2026Case{"rand-qwen35-tok512-Q8_0", "qwen35", 8e-2},
                      Arch2026Case{"rand-openai-moe-tok512-F32", "gpt-oss", 1e-4},
                      Arch2026Case{"rand-openai-moe-tok512-MXFP4", "gpt-oss", 2e-2},
                      Arch2026Case{"rand-deepseek2-tok512-F32", "deepseek2", 1e-4},
                      // Sharp attention (scale 1 on RMS-normed q, k) amplifies
                      // every Q8_0 rounding.
                      Arch2026Case{"rand-gemma4-tok512-Q8_0", "gemma4", 0.15}),
    [](const auto& info) {
      std::string s = info.param.file;
      for (char& ch : s)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

}  // namespace
}  // namespace pagellm
