// pagellm serve: the OpenAI-compatible HTTP server.
//
// Start-up: bind the port (so /health answers 503 "loading" at once), plan
// memory from the model's metadata (the same planner and flags as `pagellm
// plan`; a plan that does not fit is refused before anything is allocated),
// load the model, build the engine and its thread, then serve. While serving,
// the swap guard pauses admission whenever usable host RAM falls below the
// plan's headroom. SIGINT/SIGTERM: new
// requests get 503, in-flight ones have --shutdown-timeout seconds to finish
// (the rest are aborted, their streams end with an error event), then the
// server closes and the process exits 0.
#include <atomic>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cli/cache_tier_options.h"
#include "cli/cli_checks.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/llama_compat.h"
#include "cli/sampling_options.h"
#include "cli/spec_options.h"
#include "cli/version.h"
#include "cli/plan_options.h"
#include "device/memory_probe.h"
#include "engine/async_engine.h"
#include "engine/pooling.h"
#include "planner/plan_format.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "util/error.h"
#include "util/host_pages.h"
#include "util/sizes.h"

namespace pagellm::cli {

namespace {

// --chat-template-kwargs: a JSON object of template variables.
nlohmann::ordered_json parse_template_kwargs(const std::string& text) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::exception& e) {
    throw ConfigError(std::string("--chat-template-kwargs: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ConfigError("--chat-template-kwargs: must be a JSON object");
  for (const char* reserved : {"messages", "tools", "add_generation_prompt"})
    if (j.contains(reserved))
      throw ConfigError(std::string("--chat-template-kwargs: may not set '") + reserved +
                        "' (the server sets it)");
  return j;
}

struct ServeArgs {
  ModelOptions model;  // -m, -t, --no-mmap, --mlock, --no-repack: as every command
  SpeculationOptions speculation;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string alias;
  std::string chat_template;
  std::vector<std::string> cors_origins;  // --cors-origin, repeatable
  bool no_webui = false;
  bool slots = false;  // GET /slots (llama-server's --slots)
  int32_t max_queue = 256;
  bool no_prefix_cache = false;
  bool embeddings = false;  // POST /v1/embeddings
  std::string pooling;      // --pooling mean|cls|last; empty: the model's, else mean
  double shutdown_timeout_s = 10.0;
  int load_delay_ms = 0;  // test hook: hold /health at "loading" this long
  PlanOptions plan;       // devices, KV cache size and type, block size, batch limits
  CacheTierOptions cache;    // --cache-host, --cache-dir, --cache-disk
  SamplingOptions sampling;  // defaults for requests that leave a field out
  bool no_jinja = false;     // --no-jinja: the built-in template of the model's family
  std::string reasoning_format = "auto";  // none | auto | deepseek | deepseek-legacy
  std::string template_kwargs;            // --chat-template-kwargs: a JSON object
};

// GET /v1/plan: the planner's plan (as `pagellm plan --json` prints it), the
// model, and the server's own settings.
nlohmann::json plan_json(const Plan& plan, const ServeArgs& a, const std::string& path,
                         const ModelHParams& hp, uint64_t weight_bytes) {
  nlohmann::json j = plan_to_json(plan);
  j["model"] = {{"path", path},
                {"arch", hp.arch},
                {"n_layer", hp.n_layer},
                {"n_ctx_train", hp.n_ctx_train},
                {"weight_bytes", weight_bytes}};
  j["server"] = {{"prefix_caching", !a.no_prefix_cache},
                 {"max_batched_tokens", a.plan.max_batched_tokens},
                 {"max_queue", a.max_queue}};
  return j;
}

// --pooling, else the GGUF's `{arch}.pooling_type` when it names mean, cls
// or last (llama.cpp's values 1, 2, 3), else mean.
Pooling serve_pooling(const std::string& flag, const GgufFile& file, const std::string& arch) {
  if (!flag.empty()) return *parse_pooling(flag);  // checked by the flag
  if (auto v = file.get_i64(arch + ".pooling_type"))
    if (auto p = pooling_from_gguf(*v)) return *p;
  return Pooling::kMean;
}

int run_serve(ServeArgs a) {
  // Signals are taken by sigwait() below, never by a handler; every thread
  // started from here on inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // The file and the plan first: a bad model or a plan that does not fit
  // fails here, before anything listens.
  a.speculation.apply(a.plan);
  if (!a.no_prefix_cache) a.cache.apply(a.plan);  // no prefix cache: no host tier to charge
  const EnginePlan ep = plan_engine(a.model, a.plan);
  const RunOptions run{.prefix_caching = !a.no_prefix_cache,
                       .speculation = a.speculation.config(),
                       .disk_tier = a.cache.options(),
                       .host_tier = a.cache.host_options()};
  // Under an MPI launcher, ranks other than 0 hold later layers and serve
  // rank 0's steps: they never listen (load_engine does not return there).
  if (mpi_rank() > 0) load_engine(a.model, a.plan, ep, run);
  const std::string& path = ep.path;
  HttpServerOptions hopts;
  hopts.model_id = a.alias.empty() ? std::filesystem::path(path).stem().string() : a.alias;
  hopts.api_key = a.api_key;
  hopts.version = version_line();
  hopts.cors_origins = a.cors_origins;
  hopts.web_ui = !a.no_webui;
  hopts.slots = a.slots;
  HttpServer server(hopts);
  const int port = server.bind(a.host, a.port);
  std::printf("pagellm serve: listening on http://%s:%d (loading the model)\n", a.host.c_str(),
              port);
  std::fflush(stdout);
  std::thread http([&] { server.run(); });
  auto stop_http = [&] {
    server.stop();
    http.join();
  };

  EngineSetup s;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<AsyncEngine> async;
  std::unique_ptr<ChatPrompt> chat;
  try {
    if (a.load_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(a.load_delay_ms));
    s = load_engine(a.model, a.plan, ep, run);
    const Plan& plan = s.plan;
    const EngineConfig& cfg = s.config;
    std::printf("pagellm serve: allocating the KV cache (%s)\n",
                format_size(plan.kv_bytes()).c_str());
    std::fflush(stdout);
    {
      // Touching gigabytes of cache takes seconds: say how far it got.
      int shown = 0;  // tenths
      ScopedHostPagesProgress progress([&shown](size_t done, size_t total) {
        const int tenth = static_cast<int>(done * 10 / total);
        if (tenth <= shown) return;
        shown = tenth;
        std::printf("pagellm serve: allocating: %s of %s\n", format_size(done).c_str(),
                    format_size(total).c_str());
        std::fflush(stdout);
      });
      engine = std::make_unique<Engine>(*s.model, *s.tokenizer, *s.pool, cfg);
    }
    a.speculation.attach(*engine, s, /*log=*/true);
    async = std::make_unique<AsyncEngine>(*engine, a.max_queue);
    if (a.no_jinja) {
      if (a.chat_template.empty())
        a.chat_template = no_jinja_template(s.model->file(), s.tokenizer->vocab());
      else
        std::fprintf(stderr, "note: --no-jinja: --chat-template already chooses the template\n");
    }
    chat = ChatPrompt::for_model(s.model->file(), s.tokenizer->vocab(), a.chat_template);
    if (!chat->warning().empty())
      std::fprintf(stderr, "pagellm serve: chat template: %s\n", chat->warning().c_str());
    chat->set_reasoning_format(*reasoning_format_from(a.reasoning_format));
    if (!a.template_kwargs.empty()) chat->set_template_kwargs(parse_template_kwargs(a.template_kwargs));
    if (chat->think_syntax())
      std::printf("pagellm serve: the chat template reasons (%s...%s): reasoning format %s%s\n",
                  chat->think_syntax()->open.c_str(), chat->think_syntax()->close.c_str(),
                  a.reasoning_format.c_str(),
                  a.reasoning_format == "none" ? " (thoughts stay in the content)"
                                               : " (thoughts go to reasoning_content)");

    auto ctx = std::make_shared<ServingContext>();
    ctx->created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
    ctx->tokenizer = s.tokenizer.get();
    ctx->engine = async.get();
    ctx->chat = chat.get();
    ctx->limits.n_vocab = s.model->hparams().n_vocab;
    // A prompt and its completion must fit in the context and in the cache.
    ctx->limits.max_context = std::min<int64_t>(
        engine->max_seq_len(), static_cast<int64_t>(cfg.num_blocks) * cfg.block_size);
    ctx->plan = plan_json(plan, a, path, ep.hparams, ep.weight_bytes);
    ctx->embeddings = a.embeddings;
    ctx->pooling = serve_pooling(a.pooling, s.model->file(), ep.hparams.arch);
    ctx->sampling_defaults = a.sampling.defaults(s.model->file());
    std::printf(
        "pagellm serve: ready: model %s (%s), context %lld tokens, KV cache %d blocks of %d "
        "(%s, %s), layers %s, chat template %s, %d threads; sampling defaults: %s\n",
        hopts.model_id.c_str(), path.c_str(), static_cast<long long>(ctx->limits.max_context),
        cfg.num_blocks, cfg.block_size, dtype_name(cfg.kv_type),
        format_size(plan.kv_bytes()).c_str(), plan.device_map().c_str(),
        chat->description().c_str(), s.pool->size(), ctx->sampling_defaults.describe().c_str());
    std::fflush(stdout);
    server.set_ready(ctx);
  } catch (...) {
    stop_http();
    throw;
  }

  // A pipeline whose ranks stop answering fails every request from then on:
  // shut down and exit non-zero so that a supervisor restarts the job.
  // `signalled`: shutdown has begun (a signal came, or the watcher sent one).
  std::atomic<bool> pipeline_broken{false}, stopping{false}, signalled{false};
  std::thread watcher;
  if (s.link)
    watcher = std::thread([&] {
      while (!stopping) {
        if (s.link->broken()) {
          pipeline_broken = true;
          // Once shutdown has begun, a signal of ours would count as the
          // second one and exit before the streams got their error events.
          if (!signalled.exchange(true)) {
            std::printf("pagellm serve: the pipeline of %d ranks is broken: shutting down\n",
                        mpi_size());
            std::fflush(stdout);
            ::kill(::getpid(), SIGTERM);
          }
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  siginfo_t info{};
  int sig = -1;
  while (sig < 0) sig = sigwaitinfo(&stop_signals, &info);
  signalled = true;
  // Under MPI a signal from the process that started this rank (mpirun's or
  // orted's teardown, after a rank died or the job was stopped) is followed by
  // SIGKILL about a second later (Open MPI's odls_base_sigkill_timeout): the
  // engine thread may be inside a long step then (a prefill on this rank's
  // layers), so requests still running get their error event well before.
  const bool launcher_teardown = s.link && info.si_pid == ::getppid();
  std::printf("pagellm serve: %s: shutting down (up to %.0f s for in-flight requests; a "
              "second signal exits at once)\n",
              sig == SIGINT ? "SIGINT" : "SIGTERM", a.shutdown_timeout_s);
  std::fflush(stdout);
  // A second SIGINT/SIGTERM while in-flight requests finish: exit now (not
  // one this process sent itself).
  std::thread([stop_signals] {
    siginfo_t again{};
    while (sigwaitinfo(&stop_signals, &again) < 0 || again.si_pid == ::getpid()) {
    }
    std::printf("pagellm serve: second signal: exiting without waiting\n");
    std::fflush(stdout);
    std::_Exit(130);
  }).detach();
  server.begin_shutdown();
  // Under MPI a SIGTERM mostly means the job is being torn down (mpirun stops
  // every rank once one died): a step that waits on the other ranks for more
  // than a moment will not be answered, so end it with an error now (its
  // streams get their error event before mpirun's SIGKILL).
  std::thread unblock;
  if (s.link)
    unblock = std::thread([&, launcher_teardown] {
      const auto t0 = std::chrono::steady_clock::now();
      bool ended = false;
      while (!stopping) {
        if (s.link->waiting_ms() > 250) {
          s.link->interrupt();
          pipeline_broken = true;
        }
        if (launcher_teardown && !ended &&
            std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(300)) {
          ended = true;
          const int32_t n = async->end_in_flight_now(
              "the MPI job is being stopped (a rank died or the job was ended) before the "
              "request finished");
          if (n > 0) {
            std::fprintf(stderr, "pagellm serve: the MPI launcher is stopping this rank: ended %d "
                         "request(s) with an error\n", n);
            pipeline_broken = true;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  async->shutdown(std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout_s * 1000)));
  // Aborted streams still send their error event and [DONE]: let them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (server.active_requests() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop_http();
  async.reset();
  stopping = true;
  if (watcher.joinable()) watcher.join();
  if (unblock.joinable()) unblock.join();
  std::printf("pagellm serve: stopped\n");
  std::fflush(stdout);
  return pipeline_broken ? 3 : 0;
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  a->model.add_to(*sub);
  a->speculation.add_to(*sub);
  sub->add_option("--host", a->host, "Address to listen on (default 127.0.0.1)");
  sub->add_option("--port", a->port, "Port (0: any free port; default 8080)")
      ->check(in_range(0, 65535));
  sub->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY' on /v1/*")
      ->envname("PAGELLM_API_KEY");
  sub->add_option("--alias", a->alias, "Model name in the API (default: the file's stem)");
  sub->add_option("--chat-template", a->chat_template,
                  "Chat template: a built-in name or a Jinja file (default: the model's own)");
  sub->add_option("--reasoning-format", a->reasoning_format,
                  "Thoughts of reasoning templates (<think>...</think>): none (left in the "
                  "content), auto or deepseek (split into reasoning_content), deepseek-legacy "
                  "(split and also left in the content); a request's reasoning_format wins "
                  "(default auto)")
      ->check(CLI::IsMember({"none", "auto", "deepseek", "deepseek-legacy"}));
  sub->add_option("--chat-template-kwargs", a->template_kwargs,
                  "Extra chat template variables, a JSON object, e.g. '{\"enable_thinking\": "
                  "false}' (a request's chat_template_kwargs win)");
  sub->add_option("--max-queue", a->max_queue,
                  "Requests in flight (running and waiting) before 503 (default 256)")
      ->check(above(0));
  sub->add_flag("--no-prefix-cache", a->no_prefix_cache, "Disable prefix caching");
  a->cache.add_to(*sub);
  sub->add_option("--cors-origin", a->cors_origins,
                  "Allow browsers on this origin (scheme://host[:port], or '*') to call the API; "
                  "repeatable (default: no CORS)")
      ->take_all()
      ->allow_extra_args(false);
  sub->add_flag("--no-webui", a->no_webui, "Do not serve the chat page at /");
  sub->add_flag("--slots", a->slots, "Answer GET /slots (the sequences being served; off: 501)");
  sub->add_flag("--embeddings", a->embeddings, "Serve POST /v1/embeddings");
  sub->add_option("--pooling", a->pooling,
                  "Embedding pooling: mean, cls or last (default: the model's pooling_type when "
                  "it names one of these, else mean)")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  sub->add_option("--shutdown-timeout", a->shutdown_timeout_s,
                  "Seconds in-flight requests get to finish on SIGINT/SIGTERM (default 10)")
      ->check(at_least(0));
  sub->add_option("--debug-load-delay-ms", a->load_delay_ms,
                  "Test hook: wait this long before loading the model")
      ->group("");
  a->plan.add_to(*sub);
  a->sampling.add_server_defaults_to(*sub);
  add_jinja_flags(*sub, a->no_jinja, /*applies_templates=*/true);
  return [a] { return run_serve(*a); };
}

}  // namespace pagellm::cli
