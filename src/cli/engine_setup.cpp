#include "cli/engine_setup.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/cli_checks.h"
#include "cli/commands.h"
#include "cli/pipeline_setup.h"
#include "planner/model_footprint.h"
#include "planner/plan_format.h"

namespace pagellm::cli {

void ModelOptions::add_to(CLI::App& sub) {
  sub.add_option("-m,--model", model, "GGUF model file (default: the model shipped in the repo)");
  sub.add_option("-t,--threads", threads, "Threads (default: physical cores)")
      ->check(at_least(0));
  sub.add_flag("--no-mmap", no_mmap, "Read the weights into memory instead of mmap");
  sub.add_flag("--mlock", mlock, "Lock the weights in RAM");
  sub.add_flag(
      "--no-repack", no_repack,
      "Keep the weight matrices in the file's layout (zero-copy mmap) instead of "
      "repacking the Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, K-quant, IQ4, MXFP4, F16 and BF16 ones for "
      "the faster CPU kernels");
}

std::string ModelOptions::path() const {
  return model.empty() ? default_model_path() : model;
}

EnginePlan plan_engine(const ModelOptions& mo, const PlanOptions& po) {
  if (mpi_size() > 1) return plan_pipeline(mo, po);
  // Plan from metadata alone: nothing is loaded or allocated before it fits.
  EnginePlan p;
  p.path = mo.path();
  auto meta = GgufFile::open(p.path);
  p.hparams = ModelHParams::from_gguf(*meta);
  SystemProbe probe;
  PlanOptions plan_opts = po;
  plan_opts.repack = !mo.no_repack;
  p.plan = plan_opts.make_plan(*meta, p.hparams, probe);
  p.weight_bytes =
      model_footprint(*meta, p.hparams, plan_opts.footprint_options()).total_weight_bytes();
  return p;
}

EngineConfig engine_config(const Plan& plan, const PlanOptions& po, RunOptions run) {
  run.max_batched_tokens = po.max_batched_tokens;
  run.max_prefill_tokens_while_decoding = po.max_prefill_while_decoding;
  const uint64_t headroom = plan.devices.back().headroom_bytes;  // the host is last
  run.memory_ok = [headroom] { return read_host_memory().usable_bytes() >= headroom; };
  run.memory_room = [headroom] {
    return static_cast<int64_t>(read_host_memory().usable_bytes()) - static_cast<int64_t>(headroom);
  };
  // A device with memory of its own (a GPU): its free memory now (CUDA:
  // cudaMemGetInfo; PAGELLM_DEVICE_MEMINFO simulates it) above its headroom.
  std::vector<std::pair<Device, uint64_t>> devices;
  for (const DevicePlan& d : plan.devices)
    if (!d.device.is_host()) devices.emplace_back(d.device, d.headroom_bytes);
  run.device_memory_room = [devices](const std::string& name) -> int64_t {
    for (const auto& [device, headroom] : devices)
      if (device.name() == name) {
        SystemProbe probe;
        return static_cast<int64_t>(probe.measure(device).free_bytes) -
               static_cast<int64_t>(headroom);
      }
    return INT64_MAX;  // not the plan's: not watched
  };
  // PAGELLM_ELASTIC_POOL=0: the KV pools are populated whole at start.
  if (const char* v = std::getenv("PAGELLM_ELASTIC_POOL"); v && std::string_view(v) == "0")
    run.elastic_pool = false;
  return EngineConfig::from_plan(plan, run);
}

EngineSetup load_engine(const ModelOptions& mo, const PlanOptions& po, const EnginePlan& ep,
                        const RunOptions& run, const ModelLoadOptions* stage) {
  if (!stage && mpi_size() > 1) return load_pipeline_engine(mo, po, ep, run);
  EngineSetup s;
  s.plan = ep.plan;
  s.model = stage ? ModelRunner::load(ep.path, *stage)
                  : ModelRunner::load(ep.path, {.use_mmap = !mo.no_mmap,
                                                .mlock = mo.mlock,
                                                .repack = !mo.no_repack,
                                                .placements = s.plan.kv_placements(),
                                                .experts_on_host = s.plan.experts_on_host});
  s.tokenizer = Tokenizer::from_gguf(s.model->file());
  if (!s.tokenizer->vocab().warning().empty())
    std::fprintf(stderr, "warning: %s\n", s.tokenizer->vocab().warning().c_str());
  s.pool = std::make_unique<ThreadPool>(mo.threads > 0 ? mo.threads : ThreadPool::physical_cores());
  s.config = engine_config(s.plan, po, run);
  return s;
}

EngineSetup setup_engine(const ModelOptions& mo, const PlanOptions& po, bool log_plan,
                         const RunOptions& run) {
  const EnginePlan ep = plan_engine(mo, po);
  if (log_plan && mpi_rank() == 0) std::fputs(format_plan_summary(ep.plan).c_str(), stderr);
  return load_engine(mo, po, ep, run);
}

}  // namespace pagellm::cli
