// pagellm bench: closed-loop throughput and latency of the engine in-process.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backend/backend_factory.h"
#include "cli/cli_checks.h"
#include "cli/commands.h"
#include "cli/sampling_options.h"
#include "cli/engine_setup.h"
#include "cli/spec_options.h"
#include "mpi/mpi_pipeline.h"
#include "engine/bench_runner.h"
#include "engine/roofline.h"
#include "util/error.h"
#include "util/memory_stats.h"
#include "util/step_profile.h"

namespace pagellm::cli {

namespace {

struct BenchArgs {
  ModelOptions model;
  PlanOptions plan;
  BenchSpec spec;
  SpeculationOptions speculation;
  bool no_prefix_cache = false;
  bool json = false;
  bool roofline = false;
  bool profile = false;
  bool plan_max_num_seqs_given = false;
  std::string grammar_file, json_schema_file;
};

// Read probes around the decode that differ by more than this: say so.
constexpr double kBandwidthChangeWarn = 0.15;

int run_roofline_cmd(BenchArgs a) {
  const RooflineSpec spec;
  int32_t longest = spec.batch_prompt + spec.batch_gen;
  for (int32_t len : spec.prefill_lens) longest = std::max(longest, len + 1);
  if (a.plan.max_seq_len == 0) {
    const int64_t bs = a.plan.block_size;
    a.plan.max_seq_len = (longest + bs - 1) / bs * bs;
  }
  if (!a.plan_max_num_seqs_given) a.plan.max_num_seqs = 64;
  a.speculation.apply(a.plan);
  // No prefix cache: every prompt is computed.
  EngineSetup setup = setup_engine(a.model, a.plan, /*log_plan=*/!a.json,
                                   {.prefix_caching = false, .speculation = a.speculation.config()});
  Engine engine(*setup.model, *setup.tokenizer, *setup.pool, setup.config);
  a.speculation.attach(engine, setup, /*log=*/!a.json);
  const bool tty = ::isatty(STDERR_FILENO) && !a.json;
  // The host's bandwidth probe runs on the engine's threads.
  const std::unique_ptr<Backend> host = make_backend("host");
  host->set_thread_pool(setup.pool.get());
  RooflineResult r = run_roofline(engine, *host, setup.model->hparams().n_vocab,
                                  setup.model->weight_shares(), spec, [&](const std::string& what) {
                                    if (tty)
                                      std::fprintf(stderr, "measuring %s...\n", what.c_str());
                                  });
  const bool amx = cpu_kernels_use_amx();
  if (a.json) {
    nlohmann::json pre = nlohmann::json::array(), bat = nlohmann::json::array(),
                   devs = nlohmann::json::array();
    for (const auto& d : r.devices)
      devs.push_back({{"device", d.device},
                      {"weight_bytes", d.weight_bytes},
                      {"read_bandwidth_bytes_per_s", d.read_bytes_per_s},
                      {"own_memory", d.own_memory}});
    for (const auto& p : r.prefill)
      pre.push_back({{"prompt_len", p.prompt_len}, {"tokens_per_s", p.tokens_per_s}});
    for (const auto& b : r.batched)
      bat.push_back({{"concurrency", b.concurrency},
                     {"generated_tokens_per_s", b.generated_tokens_per_s},
                     {"decode_tokens_per_s", b.decode_tokens_per_s}});
    nlohmann::json j = {{"threads", setup.pool->size()},
                        {"cpu_isa", cpu_kernel_isa()},
                        {"cpu_amx_int8", amx},
                        {"read_bandwidth_bytes_per_s", r.bandwidth.read_bytes_per_s},
                        {"read_bandwidth_after_decode_bytes_per_s", r.read_bytes_per_s_after},
                        {"bandwidth_change", r.bandwidth_change()},
                        {"triad_bandwidth_bytes_per_s", r.bandwidth.triad_bytes_per_s},
                        {"weight_bytes_per_token", r.weight_bytes_per_token},
                        {"devices", devs},
                        {"decode_tokens_per_s", r.decode_tokens_per_s},
                        {"decode_ceiling_tokens_per_s", r.decode_ceiling_tokens_per_s},
                        {"decode_fraction_of_ceiling", r.decode_fraction},
                        {"prefill", pre},
                        {"batched", bat},
                        {"batch1_again_decode_tokens_per_s", r.batch1_again_decode_tokens_per_s},
                        {"batched_base_decode_tokens_per_s", r.batched_base_decode_tokens_per_s},
                        {"peak_rss_bytes", peak_rss_bytes()}};
    std::puts(j.dump().c_str());
    return 0;
  }
  fmt::print("CPU kernels: {}{}\n", cpu_kernel_isa(), amx ? " + AMX int8 tiles" : "");
  fmt::print("memory bandwidth ({} threads): read {:.1f} GB/s, triad {:.1f} GB/s\n",
             setup.pool->size(), r.bandwidth.read_bytes_per_s / 1e9,
             r.bandwidth.triad_bytes_per_s / 1e9);
  fmt::print("weights streamed per decoded token: {:.1f} MiB\n",
             static_cast<double>(r.weight_bytes_per_token) / (1 << 20));
  for (const auto& d : r.devices)
    if (d.own_memory || r.devices.size() > 1)
      fmt::print("  {}: {:.1f} MiB of them, read at {:.1f} GB/s{}\n", d.device,
                 static_cast<double>(d.weight_bytes) / (1 << 20), d.read_bytes_per_s / 1e9,
                 d.own_memory ? " (its own memory)" : " (host RAM)");
  fmt::print("decode, batch 1: {:.1f} tok/s of a {:.1f} tok/s ceiling ({:.0f}%)\n",
             r.decode_tokens_per_s, r.decode_ceiling_tokens_per_s, r.decode_fraction * 100);
  fmt::print("  read bandwidth right after the decode: {:.1f} GB/s{}\n",
             r.read_bytes_per_s_after / 1e9,
             r.bandwidth_change() > kBandwidthChangeWarn
                 ? " -- the machine's bandwidth changed during the measurement; rerun for a "
                   "fraction you can trust"
                 : "");
  for (const auto& p : r.prefill)
    fmt::print("prefill, prompt {}: {:.1f} tok/s\n", p.prompt_len, p.tokens_per_s);
  const double base = r.batched_base_decode_tokens_per_s;
  for (const auto& b : r.batched)
    fmt::print(
        "concurrency {:>3}: {:7.1f} generated tok/s end to end, decode {:7.1f} tok/s ({:.1f}x "
        "batch 1)\n",
        b.concurrency, b.generated_tokens_per_s, b.decode_tokens_per_s,
        base > 0 ? b.decode_tokens_per_s / base : 0.0);
  if (!r.batched.empty())
    fmt::print(
        "concurrency   1 again after the sweep: decode {:.1f} tok/s (the ratios divide by "
        "{:.1f}, the faster batch-1 run)\n",
        r.batch1_again_decode_tokens_per_s, base);
  return 0;
}

int run_bench_cmd(BenchArgs a) {
  a.spec.grammar = load_grammar(a.grammar_file, a.json_schema_file);
  const BenchSpec& s = a.spec;
  // Size the cache for the load unless told otherwise: `concurrency`
  // sequences of prompt + generation.
  if (a.plan.max_seq_len == 0) {
    const int64_t bs = a.plan.block_size;
    a.plan.max_seq_len = (s.prompt_len + s.gen_len + bs - 1) / bs * bs;
  }
  if (!a.plan_max_num_seqs_given) a.plan.max_num_seqs = s.concurrency;
  // The host's default cache holds only a few full-length sequences (its
  // seq_len is the load's here): room for the whole concurrency, so the
  // figures are not a measure of preemption.
  if (a.plan.kv_tokens == 0 && a.plan.kv_mem.empty() && a.plan.kv_fraction == 0)
    a.plan.kv_tokens = a.plan.max_seq_len * a.plan.max_num_seqs;
  a.speculation.apply(a.plan);
  if (a.profile) enable_step_profile();
  EngineSetup setup = setup_engine(
      a.model, a.plan, /*log_plan=*/!a.json,
      {.prefix_caching = !a.no_prefix_cache, .speculation = a.speculation.config()});
  Engine engine(*setup.model, *setup.tokenizer, *setup.pool, setup.config);
  a.speculation.attach(engine, setup, /*log=*/!a.json);
  auto& model = setup.model;
  auto& pool = setup.pool;

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
                        {"threads", pool->size()},
                        {"kv_blocks", setup.config.num_blocks},
                        {"block_size", setup.config.block_size},
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
                        {"output_hash", fmt::format("{:016x}", r.output_hash)},
                        {"pipeline_ranks", mpi_size()},
                        {"pipeline_steps", setup.link ? setup.link->steps() : 0},
                        {"pipeline_wait_s", setup.link ? setup.link->wait_seconds() : 0.0},
                        {"pipeline_remote_compute_s",
                         setup.link ? setup.link->remote_compute_seconds() : 0.0},
                        {"spec_proposed", engine.stats().spec_proposed},
                        {"spec_accepted", engine.stats().spec_accepted},
                        {"peak_rss_bytes", peak_rss_bytes()}};
    if (const StepProfileTotals& p = engine.step_profile(); p.steps > 0) {
      nlohmann::json phases;
      for (size_t i = 0; i < p.ns.size(); ++i)
        phases[step_phase_name(static_cast<StepPhase>(i))] = static_cast<double>(p.ns[i]) * 1e-9;
      j["step_profile"] = {{"decode_steps", p.steps},
                           {"sequences", p.sequences},
                           {"total_s", static_cast<double>(p.total_ns) * 1e-9},
                           {"phases_s", phases}};
    }
    std::puts(j.dump().c_str());
    return 0;
  }
  fmt::print(
      "requests {} (concurrency {}), prompt {} + gen {} tokens, {} threads, KV {} blocks of {}\n",
      r.requests, r.concurrency, s.prompt_len, s.gen_len, pool->size(), setup.config.num_blocks,
      setup.config.block_size);
  fmt::print("  duration {:.2f} s: {:.2f} requests/s, {:.1f} generated tokens/s\n", r.duration_s,
             r.requests_per_s, r.generated_tokens_per_s);
  fmt::print("  TTFT p50 {:.1f} ms, p99 {:.1f} ms; inter-token p50 {:.1f} ms, p99 {:.1f} ms\n",
             r.ttft_p50_s * 1e3, r.ttft_p99_s * 1e3, r.itl_p50_s * 1e3, r.itl_p99_s * 1e3);
  fmt::print(
      "  KV waste {:.2f}%, peak usage {:.1f}%, prefix-cache hit rate {:.1f}%, preemptions {}\n",
      r.kv_waste_ratio * 100, r.kv_peak_usage_ratio * 100, r.prefix_hit_rate * 100, r.preemptions);
  if (setup.link && setup.link->steps() > 0) {
    const double steps = static_cast<double>(setup.link->steps());
    fmt::print("  pipeline of {} ranks: per step {:.2f} ms waiting for ranks 1-{}, of which {:.2f} ms "
               "their compute and {:.2f} ms communication\n",
               mpi_size(), setup.link->wait_seconds() / steps * 1e3, mpi_size() - 1,
               setup.link->remote_compute_seconds() / steps * 1e3,
               (setup.link->wait_seconds() - setup.link->remote_compute_seconds()) / steps * 1e3);
  }
  if (engine.stats().spec_proposed > 0)
    fmt::print("  speculative decoding: {} of {} drafted tokens accepted\n",
               engine.stats().spec_accepted, engine.stats().spec_proposed);
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Measure engine throughput and latency in-process");
  a->model.add_to(*sub);
  a->plan.add_to(*sub);
  sub->add_option("--concurrency", a->spec.concurrency, "Requests in flight")
      ->check(above(0));
  sub->add_option("--requests", a->spec.requests, "Requests in total")->check(above(0));
  sub->add_option("--prompt-len", a->spec.prompt_len, "Prompt tokens")->check(above(0));
  sub->add_option("--gen-len", a->spec.gen_len, "Generated tokens per request")
      ->check(above(0));
  sub->add_option("--shared-prefix", a->spec.shared_prefix, "Tokens every prompt shares")
      ->check(at_least(0));
  sub->add_option("--seed", a->spec.seed, "Seed of the random prompts");
  sub->add_flag("--no-prefix-cache", a->no_prefix_cache, "Disable prefix caching");
  sub->add_option("--grammar", a->grammar_file, "Constrain every reply to the GBNF grammar in FILE");
  sub->add_option("--json-schema", a->json_schema_file,
                  "Constrain every reply to JSON valid under the JSON Schema in FILE");
  a->speculation.add_to(*sub);
  sub->add_flag("--json", a->json, "Print one JSON object");
  sub->add_flag("--profile", a->profile,
                "Time the decode steps' phases (scheduling, inputs, forward pass: matmuls and "
                "attention, grammar masks, sampling, output) and print the split to stderr at the end "
                "(as PAGELLM_STEP_PROFILE=1 does)");
  sub->add_flag("--roofline", a->roofline,
                "Measure memory bandwidth, decode against its ceiling, prefill (128, 512) and "
                "batched decode at concurrency 1/4/16/64 (ignores the load flags)");
  return [a, sub] {
    BenchArgs args = *a;
    args.plan_max_num_seqs_given = sub->count("--max-num-seqs") > 0;
    return args.roofline ? run_roofline_cmd(args) : run_bench_cmd(args);
  };
}

}  // namespace pagellm::cli
