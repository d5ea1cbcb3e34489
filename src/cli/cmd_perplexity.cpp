// pagellm perplexity: a model's perplexity over a text file, as
// llama-perplexity computes it (engine/perplexity.h).
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_checks.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "engine/perplexity.h"
#include "util/error.h"
#include "util/read_file.h"

namespace pagellm::cli {
namespace {

struct PerplexityArgs {
  ModelOptions model;
  PlanOptions plan;
  std::string file;
  bool json = false;
};

void draw_progress(int32_t done, int32_t total, double ppl) {
  const int width = 30;
  const int filled = static_cast<int>(static_cast<int64_t>(width) * done / total);
  std::fprintf(stderr, "\r[%s%s] %d/%d windows, PPL %.4f", std::string(filled, '=').c_str(),
               std::string(width - filled, ' ').c_str(), done, total, ppl);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

int run_perplexity(PerplexityArgs a) {
  if (a.file.empty()) throw ConfigError("perplexity needs a text file: -f FILE");
  const std::string text = read_whole_file(a.file);
  // -c is both the window and the cache: one window at a time.
  const int64_t n_ctx = a.plan.kv_tokens > 0 ? a.plan.kv_tokens : 512;
  a.plan.kv_tokens = n_ctx;
  a.plan.max_seq_len = n_ctx;
  a.plan.max_num_seqs = 1;
  // -b: tokens per forward pass, at most a window.
  a.plan.max_batched_tokens = std::min<int32_t>(a.plan.max_batched_tokens, static_cast<int32_t>(n_ctx));
  EngineSetup s = setup_engine(a.model, a.plan, /*log_plan=*/!a.json);
  const std::vector<int32_t> tokens = s.tokenizer->encode(text, /*add_special=*/true);
  PerplexityOptions opts;
  opts.n_ctx = static_cast<int32_t>(n_ctx);
  opts.batch = a.plan.max_batched_tokens;
  opts.block_size = s.config.block_size;
  opts.kv_type = s.config.kv_type;
  opts.bos = s.tokenizer->vocab().add_bos() ? s.tokenizer->bos_id() : -1;
  if (!a.json)
    std::fprintf(stderr, "%zu tokens, windows of %lld (the second half of each scored)\n",
                 tokens.size(), static_cast<long long>(n_ctx));
  const PerplexityResult r =
      perplexity(*s.model, tokens, opts, *s.pool, a.json ? PerplexityProgress{} : draw_progress);
  if (a.json) {
    nlohmann::json j;
    j["ppl"] = r.ppl;
    j["ppl_stderr"] = r.ppl_stderr;
    j["mean_nll"] = r.mean_nll;
    j["tokens"] = r.tokens;
    j["windows"] = r.windows;
    j["n_ctx"] = n_ctx;
    std::puts(j.dump().c_str());
  } else {
    std::printf("Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored in %d windows)\n", r.ppl,
                r.ppl_stderr, static_cast<long long>(r.tokens), r.windows);
  }
  return 0;
}

}  // namespace

Runner add_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  CLI::App* sub = app.add_subcommand(
      "perplexity", "Perplexity over a text file (non-overlapping windows of -c tokens, as "
                    "llama-perplexity: the second half of each window is scored)");
  a->plan.max_batched_tokens = 512;  // -b: tokens per forward pass, as llama-perplexity
  a->model.add_to(*sub);
  a->plan.add_to(*sub);
  sub->get_option("--kv-tokens")
      ->description("Tokens per window (default 512); the KV cache holds one window");
  sub->add_option("-f,--file", a->file, "Text file to score")->required();
  sub->add_flag("--json", a->json, "Print one JSON object: ppl, ppl_stderr, tokens, windows");
  return [a] { return run_perplexity(*a); };
}

}  // namespace pagellm::cli
