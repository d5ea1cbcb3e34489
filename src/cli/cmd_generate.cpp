// pagellm generate: run one prompt and stream the continuation.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/generator.h"
#include "util/error.h"
#include "util/memory_stats.h"

namespace pagellm::cli {

std::string default_model_path() {
#ifdef PAGELLM_DEFAULT_MODEL
  if (std::filesystem::exists(PAGELLM_DEFAULT_MODEL)) return PAGELLM_DEFAULT_MODEL;
#endif
  return "tests/data/stories260K.gguf";
}

namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int32_t n_predict = 128;
  float temp = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  uint64_t seed = 0;
  bool seed_set = false;
  int threads = 0;
  int32_t context = 0;
  std::string kv_type = "f16";
  bool json = false;
  bool ignore_eos = false;
  bool no_mmap = false;
  bool mlock = false;
};

int run_generate(const GenerateArgs& a) {
  auto model = LlamaModel::load(a.model.empty() ? default_model_path() : a.model,
                                {.use_mmap = !a.no_mmap, .mlock = a.mlock});
  auto tokenizer = Tokenizer::from_gguf(model->file());
  ThreadPool pool(a.threads > 0 ? a.threads : ThreadPool::physical_cores());

  GenerateOptions opts;
  opts.max_tokens = a.n_predict;
  opts.context = a.context;
  opts.ignore_eos = a.ignore_eos;
  opts.kv_type = parse_dtype(a.kv_type);
  opts.sampling.temperature = a.temp;
  opts.sampling.top_k = a.top_k;
  opts.sampling.top_p = a.top_p;
  opts.sampling.min_p = a.min_p;
  opts.sampling.repetition_penalty = a.repeat_penalty;
  opts.sampling.repeat_last_n = a.repeat_last_n;
  opts.sampling.seed = a.seed_set ? a.seed : std::random_device{}();

  std::vector<int32_t> prompt_ids = tokenizer->encode(a.prompt, /*add_special=*/true);
  Generator gen(*model, *tokenizer, pool);
  GenerateResult r;
  if (a.json) {
    r = gen.generate(prompt_ids, opts);
  } else {
    std::fputs(a.prompt.c_str(), stdout);
    std::fflush(stdout);
    r = gen.generate(prompt_ids, opts, [](int32_t, const std::string& text) {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    });
    std::fputs("\n", stdout);
    std::fflush(stdout);
  }
  const double prefill_tps = r.prefill_seconds > 0 ? r.prompt_ids.size() / r.prefill_seconds : 0;
  const size_t n_decoded = r.output_ids.size() > 1 ? r.output_ids.size() - 1 : 0;
  const double decode_tps = r.decode_seconds > 0 && n_decoded ? n_decoded / r.decode_seconds : 0;
  if (a.json) {
    nlohmann::json j;
    j["prompt_ids"] = r.prompt_ids;
    j["output_ids"] = r.output_ids;
    j["text"] = r.text;
    j["prompt_tokens"] = r.prompt_ids.size();
    j["output_tokens"] = r.output_ids.size();
    j["prefill_tokens_per_s"] = prefill_tps;
    j["decode_tokens_per_s"] = decode_tps;
    j["prefill_seconds"] = r.prefill_seconds;
    j["decode_seconds"] = r.decode_seconds;
    j["stop_reason"] = r.stop_reason;
    j["threads"] = pool.size();
    j["peak_rss_bytes"] = peak_rss_bytes();
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fprintf(stderr,
                 "prompt %zu tokens, generated %zu tokens (%s); prefill %.1f tokens/s, decode %.1f "
                 "tokens/s; %d threads; peak RSS %.1f MiB\n",
                 r.prompt_ids.size(), r.output_ids.size(), r.stop_reason.c_str(), prefill_tps,
                 decode_tps, pool.size(), peak_rss_bytes() / 1048576.0);
  }
  return 0;
}

}  // namespace

Runner add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt");
  sub->add_option("-m,--model", a->model,
                  "GGUF model file (default: the model shipped in the repo)");
  sub->add_option("-p,--prompt", a->prompt, "Prompt text");
  sub->add_option("-n,--n-predict", a->n_predict, "Tokens to generate")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--temp", a->temp, "Temperature (0 = greedy)")->check(CLI::NonNegativeNumber);
  sub->add_option("--top-k", a->top_k, "Top-k (0 = off)")->check(CLI::NonNegativeNumber);
  sub->add_option("--top-p", a->top_p, "Top-p (1 = off)")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--min-p", a->min_p, "Min-p (0 = off)")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--repeat-penalty", a->repeat_penalty, "Repetition penalty (1 = off)");
  sub->add_option("--repeat-last-n", a->repeat_last_n, "Tokens the repetition penalty looks at");
  sub->add_option_function<uint64_t>(
      "--seed", [a](const uint64_t& s) { a->seed = s, a->seed_set = true; }, "Random seed");
  sub->add_option("-t,--threads", a->threads, "Threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("-c,--ctx-size,--kv-tokens", a->context,
                  "Context size in tokens (default: the model's trained context)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--kv-type", a->kv_type, "KV cache type: f16, f32 or q8_0");
  sub->add_flag("--json", a->json, "Print one JSON object instead of streaming text");
  sub->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past end-of-sequence");
  sub->add_flag("--no-mmap", a->no_mmap, "Read the weights into memory instead of mmap");
  sub->add_flag("--mlock", a->mlock, "Lock the weights in RAM");
  return [a] { return run_generate(*a); };
}

}  // namespace pagellm::cli
