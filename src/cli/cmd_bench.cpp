// pagellm bench: closed-loop throughput and latency of the engine in-process.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/bench_runner.h"
#include "util/error.h"
#include "util/memory_stats.h"

namespace pagellm::cli {

namespace {

struct BenchArgs {
  std::string model;
  BenchSpec spec;
  int threads = 0;
  int64_t kv_tokens = 0;
  std::string kv_type = "f16";
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_batched_tokens = 2048;
  bool no_prefix_cache = false;
  bool json = false;
};

int run_bench_cmd(const BenchArgs& a) {
  auto model = LlamaModel::load(a.model.empty() ? default_model_path() : a.model);
  auto tok = Tokenizer::from_gguf(model->file());
  ThreadPool pool(a.threads > 0 ? a.threads : ThreadPool::physical_cores());
  const BenchSpec& s = a.spec;
  EngineConfig cfg;
  cfg.block_size = a.block_size;
  cfg.kv_type = parse_dtype(a.kv_type);
  cfg.prefix_caching = !a.no_prefix_cache;
  cfg.scheduler.max_num_seqs = a.max_num_seqs;
  cfg.scheduler.max_batched_tokens = a.max_batched_tokens;
  const int64_t per_seq = s.prompt_len + s.gen_len;
  if (per_seq >= model->hparams().n_ctx_train)
    throw ConfigError(fmt::format("--prompt-len + --gen-len = {} exceeds the model's context {}",
                                  per_seq, model->hparams().n_ctx_train));
  // Default cache: every concurrent sequence at full length.
  const int64_t tokens =
      a.kv_tokens > 0 ? a.kv_tokens
                      : std::min<int64_t>(s.concurrency, a.max_num_seqs) * (per_seq + a.block_size);
  cfg.num_blocks = static_cast<int32_t>((tokens + a.block_size - 1) / a.block_size);
  Engine engine(*model, *tok, pool, cfg);

  const bool tty = ::isatty(STDERR_FILENO) && !a.json;
  auto progress = [&](int32_t done, int32_t total) {
    if (!tty) return;
    const int width = 30, filled = done * width / total;
    std::fprintf(stderr, "\r[%s%s] %d/%d", std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), done, total);
    if (done == total) std::fputc('\n', stderr);
  };
  BenchResult r = run_bench(engine, model->hparams().n_vocab, s, progress);
  if (a.json) {
    nlohmann::json j = {{"requests", r.requests},
                        {"concurrency", r.concurrency},
                        {"prompt_len", s.prompt_len},
                        {"gen_len", s.gen_len},
                        {"shared_prefix", s.shared_prefix},
                        {"threads", pool.size()},
                        {"kv_blocks", cfg.num_blocks},
                        {"block_size", cfg.block_size},
                        {"prompt_tokens", r.prompt_tokens},
                        {"generated_tokens", r.generated_tokens},
                        {"duration_s", r.duration_s},
                        {"requests_per_s", r.requests_per_s},
                        {"generated_tokens_per_s", r.generated_tokens_per_s},
                        {"ttft_p50_s", r.ttft_p50_s},
                        {"ttft_p99_s", r.ttft_p99_s},
                        {"itl_p50_s", r.itl_p50_s},
                        {"itl_p99_s", r.itl_p99_s},
                        {"kv_waste_ratio", r.kv_waste_ratio},
                        {"kv_peak_usage_ratio", r.kv_peak_usage_ratio},
                        {"prefix_hit_rate", r.prefix_hit_rate},
                        {"preemptions", r.preemptions},
                        {"steps", r.steps},
                        {"peak_rss_bytes", peak_rss_bytes()}};
    std::puts(j.dump().c_str());
    return 0;
  }
  fmt::print(
      "requests {} (concurrency {}), prompt {} + gen {} tokens, {} threads, KV {} blocks of {}\n",
      r.requests, r.concurrency, s.prompt_len, s.gen_len, pool.size(), cfg.num_blocks,
      cfg.block_size);
  fmt::print("  duration {:.2f} s: {:.2f} requests/s, {:.1f} generated tokens/s\n", r.duration_s,
             r.requests_per_s, r.generated_tokens_per_s);
  fmt::print("  TTFT p50 {:.1f} ms, p99 {:.1f} ms; inter-token p50 {:.1f} ms, p99 {:.1f} ms\n",
             r.ttft_p50_s * 1e3, r.ttft_p99_s * 1e3, r.itl_p50_s * 1e3, r.itl_p99_s * 1e3);
  fmt::print(
      "  KV waste {:.2f}%, peak usage {:.1f}%, prefix-cache hit rate {:.1f}%, preemptions {}\n",
      r.kv_waste_ratio * 100, r.kv_peak_usage_ratio * 100, r.prefix_hit_rate * 100, r.preemptions);
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Measure engine throughput and latency in-process");
  sub->add_option("-m,--model", a->model, "GGUF model (default: the model shipped in the repo)");
  sub->add_option("--concurrency", a->spec.concurrency, "Requests in flight")
      ->check(CLI::PositiveNumber);
  sub->add_option("--requests", a->spec.requests, "Requests in total")->check(CLI::PositiveNumber);
  sub->add_option("--prompt-len", a->spec.prompt_len, "Prompt tokens")->check(CLI::PositiveNumber);
  sub->add_option("--gen-len", a->spec.gen_len, "Generated tokens per request")
      ->check(CLI::PositiveNumber);
  sub->add_option("--shared-prefix", a->spec.shared_prefix, "Tokens every prompt shares")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", a->spec.seed, "Seed of the random prompts");
  sub->add_option("-t,--threads", a->threads, "Threads (default: physical cores)");
  sub->add_option("-c,--kv-tokens", a->kv_tokens,
                  "KV cache size in tokens (default: concurrency x (prompt + gen))");
  sub->add_option("--kv-type", a->kv_type, "KV cache type: f16, f32 or q8_0");
  sub->add_option("--block-size", a->block_size, "KV block size (8, 16, 32)");
  sub->add_option("--max-num-seqs", a->max_num_seqs, "Most sequences per step")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-batched-tokens", a->max_batched_tokens, "Most tokens per step")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--no-prefix-cache", a->no_prefix_cache, "Disable prefix caching");
  sub->add_flag("--json", a->json, "Print one JSON object");
  return [a] { return run_bench_cmd(*a); };
}

}  // namespace pagellm::cli
