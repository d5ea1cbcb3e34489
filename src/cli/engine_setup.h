// What generate, chat, bench and serve share: the model flags, and turning
// the model + device/KV flags into a memory plan (refused before anything is
// allocated), a loaded model and an EngineConfig that follows the plan.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/plan_options.h"
#include "mpi/mpi_pipeline.h"
#include "engine/engine.h"

namespace pagellm::cli {

struct ModelOptions {
  std::string model;  // empty: the model shipped in the repo
  int threads = 0;    // 0: physical cores
  bool no_mmap = false;
  bool mlock = false;
  bool no_repack = false;

  void add_to(CLI::App& sub);
  std::string path() const;
};

struct EngineSetup {
  Plan plan;
  std::unique_ptr<ModelRunner> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
  EngineConfig config;
  // Under an MPI launcher with several ranks: rank 0's link to the others
  // (the model holds the first stage; destroyed first, it shuts them down).
  std::unique_ptr<MpiPipelineLink> link;
};

// The plan from the file's metadata alone (validates the file; throws
// FormatError / ConfigError, or PlanError when it does not fit).
struct EnginePlan {
  std::string path;
  ModelHParams hparams;
  Plan plan;
  uint64_t weight_bytes = 0;
  // Under MPI (cli/pipeline_setup.h) each rank's layers and devices are its
  // node's in the plan (Plan::node_placements).
};
EnginePlan plan_engine(const ModelOptions& mo, const PlanOptions& po);
// The EngineConfig that follows the plan, with the command's `run` options
// (prefix caching, speculation); the batching flags come from `po`, and the
// swap guard pauses admission while host RAM available drops under the
// host's headroom.
EngineConfig engine_config(const Plan& plan, const PlanOptions& po, RunOptions run);
// Loads the model as planned (its layers where the plan puts them), and the
// engine_config(): the one place every command's engine is assembled.
// Under an MPI launcher with several ranks, the pipeline's setup instead
// (cli/pipeline_setup.h): ranks other than 0 never return. `stage`: the load
// options of a pipeline stage (the pipeline's own use).
EngineSetup load_engine(const ModelOptions& mo, const PlanOptions& po, const EnginePlan& plan,
                        const RunOptions& run = {}, const ModelLoadOptions* stage = nullptr);

// Plans from the file's metadata (throws PlanError if it does not fit),
// prints the plan on stderr when `log_plan`, then loads the model (load_engine).
EngineSetup setup_engine(const ModelOptions& mo, const PlanOptions& po, bool log_plan,
                         const RunOptions& run = {});

}  // namespace pagellm::cli
