// pagellm generate: run one prompt and stream the continuation.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/sampling_options.h"
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
  SamplingOptions sampling;
  bool parse_special = false;
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
  opts.sampling = a.sampling.resolve();

  std::vector<int32_t> prompt_ids =
      tokenizer->encode(a.prompt, /*add_special=*/true, a.parse_special);
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
  a->sampling.add_to(*sub);
  sub->add_flag("--parse-special", a->parse_special,
                "Match special-token text (e.g. <|im_start|>) in the prompt");
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
