// pagellm generate: run one prompt and stream the continuation.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cache_tier_options.h"
#include "cli/cli_checks.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/llama_compat.h"
#include "cli/sampling_options.h"
#include "cli/spec_options.h"
#include "engine/generator.h"
#include "util/error.h"
#include "util/read_file.h"
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
  ModelOptions model;
  PlanOptions plan;
  std::string prompt;
  std::string prompt_file;
  int32_t n_predict = 128;
  SamplingOptions sampling;
  SpeculationOptions spec;
  CacheTierOptions cache;  // --cache-host, --cache-dir, --cache-disk
  bool parse_special = false;
  bool json = false;
  bool ignore_eos = false;
  bool logits = false;
  bool no_jinja = false;  // accepted for llama.cpp command lines; generate applies no template
};

int run_generate(GenerateArgs a) {
  if (!a.prompt_file.empty()) a.prompt = read_whole_file(a.prompt_file);
  const auto grammar = a.sampling.grammar();  // a bad grammar fails before the model loads
  // One sequence: -c is its context unless --max-seq-len says otherwise.
  if (a.plan.kv_tokens > 0 && a.plan.max_seq_len == 0) a.plan.max_seq_len = a.plan.kv_tokens;
  a.spec.apply(a.plan);
  a.cache.apply(a.plan);
  EngineSetup s = setup_engine(a.model, a.plan, /*log_plan=*/true,
                               {.speculation = a.spec.config(),
                                .disk_tier = a.cache.options(),
                                .host_tier = a.cache.host_options()});
  Generator gen(*s.model, *s.tokenizer, *s.pool, s.config);
  a.spec.attach(gen.engine(), s, /*log=*/true);
  GenerateOptions opts;
  opts.max_tokens = a.n_predict;
  opts.ignore_eos = a.ignore_eos;
  opts.prompt_logits = a.logits;
  if (a.logits && !a.json) throw ConfigError("--logits needs --json");
  if (a.logits && a.n_predict < 1) throw ConfigError("--logits needs -n >= 1 (the logits come with the first token)");
  opts.sampling = a.sampling.resolve(s.model->file());
  opts.grammar = grammar;

  std::vector<int32_t> prompt_ids =
      s.tokenizer->encode(a.prompt, /*add_special=*/true, a.parse_special);
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
    if (!r.error.empty()) j["error"] = r.error;
    j["threads"] = s.pool->size();
    j["kv_tokens"] = s.plan.kv_tokens;
    j["peak_rss_bytes"] = peak_rss_bytes();
    j["spec_proposed"] = r.spec_proposed;
    j["spec_accepted"] = r.spec_accepted;
    if (a.logits) j["last_prompt_logits"] = r.last_prompt_logits;
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fprintf(stderr,
                 "prompt %zu tokens, generated %zu tokens (%s); prefill %.1f tokens/s, decode %.1f "
                 "tokens/s; %d threads; peak RSS %.1f MiB\n",
                 r.prompt_ids.size(), r.output_ids.size(), r.stop_reason.c_str(), prefill_tps,
                 decode_tps, s.pool->size(), peak_rss_bytes() / 1048576.0);
    if (!r.error.empty()) std::fprintf(stderr, "error: %s\n", r.error.c_str());
    if (r.spec_proposed > 0)
      std::fprintf(stderr, "speculative decoding: %llu of %llu drafted tokens accepted (%.0f%%)\n",
                   static_cast<unsigned long long>(r.spec_accepted),
                   static_cast<unsigned long long>(r.spec_proposed),
                   100.0 * static_cast<double>(r.spec_accepted) / static_cast<double>(r.spec_proposed));
  }
  return r.stop_reason == "error" ? 1 : 0;
}

}  // namespace

Runner add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  a->plan.max_num_seqs = 1;  // one sequence: the cache never needs more than its context
  a->plan.max_batched_tokens = 512;  // prefill chunk: a smaller workspace for one sequence
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt");
  a->model.add_to(*sub);
  a->plan.add_to(*sub);
  auto* prompt = sub->add_option("-p,--prompt", a->prompt, "Prompt text");
  sub->add_option("-f,--file", a->prompt_file, "Read the prompt from a file")->excludes(prompt);
  sub->add_option("-n,--n-predict", a->n_predict, "Tokens to generate")
      ->capture_default_str()
      ->check(at_least(0));
  a->sampling.add_to(*sub);
  a->spec.add_to(*sub);
  a->cache.add_to(*sub);
  add_jinja_flags(*sub, a->no_jinja, /*applies_templates=*/false);
  sub->add_flag("--parse-special", a->parse_special,
                "Match special-token text (e.g. <|im_start|>) in the prompt");
  sub->add_flag("--json", a->json, "Print one JSON object instead of streaming text");
  sub->add_flag("--logits", a->logits,
                "With --json: add last_prompt_logits, the full logits at the last prompt position");
  sub->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past end-of-sequence");
  return [a] { return run_generate(*a); };
}

}  // namespace pagellm::cli
