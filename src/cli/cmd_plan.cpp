// pagellm plan: print the memory plan (devices, layer ranges, weights, KV
// cache, workspace, headroom, free after) from the model's metadata only.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cache_tier_options.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/pipeline_setup.h"
#include "mpi/mpi_pipeline.h"
#include "cli/plan_options.h"
#include "planner/plan_format.h"
#include "util/sizes.h"

namespace pagellm::cli {

namespace {

constexpr int kRefused = 2;  // the plan does not fit

struct PlanArgs {
  std::string model;
  bool json = false;
  PlanOptions opts;
  CacheTierOptions cache;  // --cache-host, --cache-dir: charged to host RAM
};

// Under an MPI launcher: the plan over every rank's host (cli/pipeline_setup.h), printed by rank 0.
int run_pipeline_plan(const PlanArgs& a, const std::string& path) {
  ModelOptions mo;
  mo.model = path;
  const bool print = mpi_rank() == 0;
  try {
    const EnginePlan ep = plan_pipeline(mo, a.opts);
    nlohmann::json model = {{"path", path},
                            {"arch", ep.hparams.arch},
                            {"n_layer", ep.hparams.n_layer},
                            {"n_ctx_train", ep.hparams.n_ctx_train},
                            {"weight_bytes", ep.weight_bytes}};
    if (!print) return 0;
    if (a.json) {
      nlohmann::json j = plan_to_json(ep.plan);
      j["model"] = model;
      std::puts(j.dump(2).c_str());
    } else {
      fmt::print("model: {} ({}, {} layers over {} nodes, weights {})\n", path, ep.hparams.arch,
                 ep.hparams.n_layer, ep.plan.nodes, format_size(ep.weight_bytes));
      fmt::print("{}", format_plan_table(ep.plan));
    }
    return 0;
  } catch (const PlanError& e) {
    if (print && a.json) std::puts(plan_error_to_json(e).dump(2).c_str());
    if (print) std::fprintf(stderr, "error: %s\n", e.what());
    return kRefused;
  }
}

int run_plan(const PlanArgs& a) {
  const std::string path = a.model.empty() ? default_model_path() : a.model;
  if (mpi_size() > 1) return run_pipeline_plan(a, path);
  PlanOptions opts = a.opts;
  a.cache.apply(opts);
  opts.for_execution = false;     // a plan to show: GPUs included
  auto f = GgufFile::open(path);  // maps the file; no weight is touched
  const ModelHParams hp = ModelHParams::from_gguf(*f);
  const ModelFootprint fp = model_footprint(*f, hp, opts.footprint_options());
  const PlanRequest req = opts.request(hp);
  if (const char* why = hp.no_prefix_tier_reason()) {
    if (opts.host_tier_bytes > 0)
      std::fprintf(stderr, "pagellm: note: --cache-host is not used: %s\n", why);
    if (opts.disk_staging_bytes > 0)
      std::fprintf(stderr, "pagellm: note: --cache-dir is not used: %s\n", why);
  }
  SystemProbe probe;
  const std::vector<PlanDevice> devices = opts.measure_devices(probe);
  nlohmann::json model = {{"path", path},
                          {"arch", hp.arch},
                          {"n_layer", hp.n_layer},
                          {"n_ctx_train", hp.n_ctx_train},
                          {"weight_bytes", fp.total_weight_bytes()}};
  try {
    const Plan plan = make_plan(req, fp, devices);
    if (a.json) {
      nlohmann::json j = plan_to_json(plan);
      j["model"] = model;
      std::puts(j.dump(2).c_str());
    } else {
      fmt::print("model: {} ({}, {} layers{}, trained context {}, weights {})\n", path, hp.arch,
                 hp.n_layer,
                 hp.has_recurrent() ? fmt::format(" ({} recurrent)", hp.n_recurrent()) : "",
                 format_count(hp.n_ctx_train), format_size(fp.total_weight_bytes()));
      fmt::print("{}", format_plan_table(plan));
    }
    return 0;
  } catch (const PlanError& e) {
    if (a.json) {
      nlohmann::json j = plan_error_to_json(e);
      j["model"] = model;
      std::puts(j.dump(2).c_str());
    }
    std::fprintf(stderr, "error: %s\n", e.what());
    return kRefused;
  }
}

}  // namespace

Runner add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand(
      "plan",
      "Print the memory plan (layer placement, KV cache size) without loading weights; exit "
      "code 2 when it does not fit");
  sub->add_option("-m,--model", a->model,
                  "GGUF model file (default: the model shipped in the repo)");
  sub->add_flag("--json", a->json, "Print JSON with exact byte counts");
  a->opts.add_to(*sub);
  a->cache.add_to(*sub);
  return [a] { return run_plan(*a); };
}

}  // namespace pagellm::cli
