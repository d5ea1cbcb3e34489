// The forward pass against references from an independent engine and a
// float64 numpy forward pass (tests/data/golden, see the READMEs there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "model/golden_util.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

using nlohmann::json;
using namespace golden;

TEST(GoldenStories260K, F32KvLogitsAndGreedy) {
  json g = load_json("golden/stories260K.json");
  auto model = ModelRunner::load(test::data_path("stories260K.gguf"));
  ThreadPool pool(2);
  double worst = 0;
  for (const auto& c : g["cases"]) {
    auto prompt = ids_of(c["prompt_ids"]);
    auto ref_ids = c["kv_f32"]["greedy_ids"];
    RunResult r = run_greedy(*model, prompt, static_cast<int>(ref_ids.size()), DType::F32, pool);
    double err = max_abs_diff(r.last_logits, c["reference_f64_last_logits"]);
    worst = std::max(worst, err);
    EXPECT_LT(err, 1e-4) << c["name"];
    expect_prefix_equal(r.ids, ref_ids, ref_ids.size(), c["name"].get<std::string>());
  }
  std::printf("stories260K F32 KV: max |logit - f64 reference| = %.3g\n", worst);
}

TEST(GoldenStories260K, F16KvGreedyUpToNearTie) {
  json g = load_json("golden/stories260K.json");
  auto model = ModelRunner::load(test::data_path("stories260K.gguf"));
  ThreadPool pool(2);
  for (const auto& c : g["cases"]) {
    auto prompt = ids_of(c["prompt_ids"]);
    const auto& greedy = c["greedy"];
    RunResult r =
        run_greedy(*model, prompt, static_cast<int>(greedy["ids"].size()), DType::F16, pool);
    size_t n = confident_steps(greedy["top2_per_step"], 1e-2);
    expect_prefix_equal(r.ids, greedy["ids"], n, c["name"].get<std::string>());
  }
}

struct RandomCase {
  const char* file;
  double tol;
  DType kv;
};

class GoldenRandom : public ::testing::TestWithParam<RandomCase> {};

TEST_P(GoldenRandom, LogitsAndGreedy) {
  const RandomCase rc = GetParam();
  json g = load_json(std::string("golden/random/") + rc.file + ".json");
  auto model = ModelRunner::load(test::data_path(std::string("golden/random/") + rc.file + ".gguf"));
  ThreadPool pool(2);
  double worst = 0;
  for (const auto& c : g["cases"]) {
    auto prompt = ids_of(c["prompt_ids"]);
    const bool f32kv = rc.kv == DType::F32;
    const json& ref_ids = f32kv ? c["kv_f32"]["greedy_ids"] : c["greedy"]["ids"];
    RunResult r = run_greedy(*model, prompt, static_cast<int>(ref_ids.size()), rc.kv, pool);
    double err = max_abs_diff(r.last_logits, c["reference_f64_last_logits"]);
    worst = std::max(worst, err);
    EXPECT_LT(err, rc.tol) << rc.file << " " << c["name"];
    // The F16-KV run's margins stand in for the F32-KV run's (not stored).
    size_t n = confident_steps(c["greedy"]["top2_per_step"], 2 * rc.tol);
    expect_prefix_equal(r.ids, ref_ids, n,
                        std::string(rc.file) + " " + c["name"].get<std::string>());
  }
  std::printf("%s (%s KV): max |logit - f64 reference| = %.3g (tolerance %.g)\n", rc.file,
              dtype_name(rc.kv), worst, rc.tol);
}

INSTANTIATE_TEST_SUITE_P(Types, GoldenRandom,
                         ::testing::Values(RandomCase{"rand-llama-tok512-F32", 1e-5, DType::F32},
                                           RandomCase{"rand-llama-tok512-F16", 2e-3, DType::F16},
                                           RandomCase{"rand-llama-tok512-Q8_0", 3e-2, DType::F16},
                                           RandomCase{"rand-llama-tok512-Q4_0", 3e-2, DType::F16},
                                           RandomCase{"rand-llama-tok512-Q4_K", 3e-2, DType::F16},
                                           RandomCase{"rand-llama-tok512-Q6_K", 3e-2, DType::F16},
                                           RandomCase{"rand-llama-spm32k-Q4_0", 3e-2, DType::F16},
                                           RandomCase{"rand-qwen2-tok512-F32", 1e-5, DType::F32},
                                           RandomCase{"rand-qwen2-tok512-Q8_0", 3e-2, DType::F16},
                                           // q8_0 KV cache: K/V rounded to 8 bits per 32-block.
                                           RandomCase{"rand-llama-tok512-F32", 3e-2, DType::Q8_0}),
                         [](const auto& info) {
                           std::string s =
                               std::string(info.param.file) + "_kv_" + dtype_name(info.param.kv);
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// More architectures (tests/data/golden/arch, llama.cpp references): the last
// prompt logits with an F32 KV cache, and 16 greedy steps with the default F16
// cache, compared up to the first step whose reference margin is under 2 x tol.
struct ArchCase {
  const char* file;
  double tol;
  // An independent float64 pass (tests/data/golden/f64, from
  // tests/model/make_moe_f64.py): compared too, and where llama.cpp itself
  // is farther than tol from it (a router near-tie it resolved the other
  // way), the llama.cpp comparison of that prompt is skipped, with the reason.
  const char* f64 = nullptr;
};

class GoldenArch : public ::testing::TestWithParam<ArchCase> {};

TEST_P(GoldenArch, LastLogitsAndGreedy) {
  const ArchCase ac = GetParam();
  const std::string base = std::string("golden/arch/") + ac.file;
  const std::string gguf = test::data_or_shared_path(base + ".gguf");
  if (gguf.empty()) GTEST_SKIP() << base << ".gguf is neither in tests/data nor in ../shared";
  json g = load_json(base + ".json");
  auto model = ModelRunner::load(gguf);
  auto tok = Tokenizer::from_gguf(model->file());
  ThreadPool pool(2);
  double worst = 0, f64_worst = 0;
  size_t compared = 0, steps = 0, case_index = 0;
  const json f64 = ac.f64 ? load_json(std::string("golden/f64/") + ac.f64) : json();
  for (const auto& c : g["cases"]) {
    const std::string what =
        std::string(ac.file) + " (" + std::to_string(c["prompt_ids"].size()) + " tokens)";
    const ArchCaseResult r = run_arch_case(*model, *tok, c, ac.tol, pool, what);
    bool llama_ok = true;
    if (ac.f64) {
      const json& ref = f64["cases"][case_index];
      ASSERT_EQ(ref["prompt_ids"], c["prompt_ids"]);
      const double ref_err = max_abs_diff(r.last_logits, ref["f64_last_logits"]);
      EXPECT_LT(ref_err, ac.tol) << what << " against the float64 pass";
      f64_worst = std::max(f64_worst, ref_err);
      std::vector<float> llama;
      for (const auto& v : c["kv_f32"]["last_logits"]) llama.push_back(v.get<float>());
      const double llama_off = max_abs_diff(llama, ref["f64_last_logits"]);
      if (llama_off >= ac.tol) {
        llama_ok = false;
        std::printf("%s: llama.cpp is %.3g from the float64 pass (router margin %.2g): its logits "
                    "are not compared for this prompt\n",
                    what.c_str(), llama_off, ref["min_router_margin"].get<double>());
      }
    }
    ++case_index;
    if (llama_ok) {
      worst = std::max(worst, r.logit_err);
      EXPECT_LT(r.logit_err, ac.tol) << what;
    }
    compared += r.compared;
    steps += r.steps;
  }
  std::printf("%s: max |logit - llama.cpp| = %.3g (tolerance %.g); greedy %zu/%zu steps compared\n",
              ac.file, worst, ac.tol, compared, steps);
  if (ac.f64) std::printf("%s: max |logit - float64 pass| = %.3g\n", ac.file, f64_worst);
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenArch,
                         ::testing::Values(ArchCase{"rand-qwen3-tok512-F32", 1e-4},
                                           ArchCase{"rand-qwen3-tok512-Q8_0", 3e-2},
                                           ArchCase{"rand-qwen3-tok512-Q4_K", 3e-2},
                                           ArchCase{"rand-gemma3-tok512-F32", 2e-3},
                                           // 0.0273 with the scalar attention, 0.0314
                                           // with the vector kernels, whose rounding
                                           // (F32 file: 4.31e-4 either way) flips
                                           // quantized activations: noise of the size
                                           // the ISAs give other Q8_0 / Q4_K files.
                                           ArchCase{"rand-gemma3-tok512-Q8_0", 3.5e-2},
                                           ArchCase{"rand-gemma2-tok512-F32", 2e-3},
                                           ArchCase{"rand-gemma2-tok512-Q8_0", 3e-2},
                                           ArchCase{"rand-phi3-tok512-F32", 1e-4},
                                           ArchCase{"rand-phi3-tok512-Q8_0", 3e-2},
                                           ArchCase{"rand-llama31-tok512-F32", 1e-4},
                                           ArchCase{"rand-llama31-tok512-Q8_0", 3e-2},
                                           ArchCase{"rand-olmo2-tok512-Q8_0", 3e-2},
                                           ArchCase{"rand-mixtral-tok512-F32", 1e-4},
                                           ArchCase{"rand-mixtral-tok512-Q8_0", 3e-2},
                                           // Random routers nearly tie (a top-2 margin of 9e-6 in
                                           // the 102-token prompt, where llama.cpp is 0.10 from a
                                           // float64 pass): checked against that pass too.
                                           ArchCase{"rand-qwen3moe-tok512-Q8_0", 3e-2,
                                                    "rand-qwen3moe-tok512-Q8_0.json"}),
                         [](const auto& info) {
                           std::string s = info.param.file;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace pagellm

