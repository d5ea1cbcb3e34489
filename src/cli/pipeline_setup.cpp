#include "cli/pipeline_setup.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/version.h"
#include "dist/mpi_pipeline.h"
#include "engine/scheduler.h"
#include "kvcache/kv_group.h"
#include "planner/model_footprint.h"
#include "util/error.h"

namespace pagellm::cli {

std::pair<int32_t, int32_t> pipeline_stage(int32_t n_layer, int rank, int ranks) {
  const int64_t L = n_layer;
  return {static_cast<int32_t>(L * rank / ranks), static_cast<int32_t>(L * (rank + 1) / ranks)};
}

namespace {

std::vector<uint8_t> to_bytes(const nlohmann::json& j) {
  const std::string s = j.dump();
  return {s.begin(), s.end()};
}
nlohmann::json from_bytes(const std::vector<uint8_t>& b) {
  return nlohmann::json::parse(std::string(b.begin(), b.end()));
}

std::chrono::milliseconds link_timeout() {
  if (const char* v = std::getenv("PAGELLM_PIPELINE_TIMEOUT_S")) {
    const double s = std::atof(v);
    if (s > 0) return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  return std::chrono::seconds(300);
}

}  // namespace

EngineSetup load_pipeline_engine(const ModelOptions& mo, const PlanOptions& po, const EnginePlan& ep) {
  const int rank = mpi_rank(), ranks = mpi_size();
  const int32_t L = ep.hparams.n_layer;
  if (L < ranks)
    throw ConfigError(fmt::format("{} ranks for a {}-layer model: each rank needs a layer", ranks, L));
  // Rank 0's plan and build, on every rank.
  nlohmann::json cfg;
  if (rank == 0) {
    const Plan& p = ep.plan;
    SchedulerConfig sc;
    sc.max_num_seqs = p.max_num_seqs;
    sc.max_batched_tokens = po.max_batched_tokens;
    sc.max_draft_rows = po.draft_rows;
    cfg = {{"version", version_line()},
           {"model_bytes", std::filesystem::file_size(ep.path)},
           {"n_layer", L},
           {"num_blocks", p.num_blocks},
           {"block_size", p.block_size},
           {"kv_type", static_cast<int>(p.kv_type)},
           {"max_num_seqs", p.max_num_seqs},
           {"max_batched_tokens", po.max_batched_tokens},
           {"max_logit_rows", Scheduler::max_logit_rows(sc)}};
  }
  std::vector<uint8_t> bytes = to_bytes(cfg);
  mpi_broadcast(bytes);
  cfg = from_bytes(bytes);
  const auto [begin, end] = pipeline_stage(L, rank, ranks);

  // Every rank's verdict on itself, refused on rank 0 by rank.
  std::string problem;
  const auto model_bytes = std::filesystem::file_size(ep.path);
  if (cfg["version"] != version_line())
    problem = fmt::format("runs {}, rank 0 runs {}", version_line(), cfg["version"].get<std::string>());
  else if (cfg["model_bytes"] != model_bytes || cfg["n_layer"] != L)
    problem = fmt::format("its model file {} ({} bytes, {} layers) differs from rank 0's ({} bytes)",
                          ep.path, model_bytes, L, cfg["model_bytes"].get<uint64_t>());
  if (problem.empty()) {
    auto meta = GgufFile::open(ep.path);
    FootprintOptions fo = po.footprint_options();
    const ModelFootprint fp = model_footprint(*meta, ep.hparams, fo);
    uint64_t need = fp.kv_bytes_per_token_layer * static_cast<uint64_t>(cfg["num_blocks"].get<int64_t>()) *
                    static_cast<uint64_t>(cfg["block_size"].get<int64_t>()) *
                    static_cast<uint64_t>(end - begin);
    for (int32_t l = begin; l < end; ++l) need += fp.layer_weight_bytes[static_cast<size_t>(l)];
    const uint64_t have = read_host_memory().usable_bytes();
    if (need > have)
      problem = fmt::format("its layers {}-{} and their KV cache need {} MiB, it has {} MiB available",
                            begin, end - 1, need >> 20, have >> 20);
  }
  const auto verdicts = mpi_gather(to_bytes(nlohmann::json(problem)));
  std::string refusal;
  for (size_t r = 0; r < verdicts.size(); ++r) {
    const std::string v = from_bytes(verdicts[r]).get<std::string>();
    if (!v.empty() && refusal.empty()) refusal = fmt::format("rank {}: {}", r, v);
  }
  std::vector<uint8_t> verdict = to_bytes(nlohmann::json(refusal));
  mpi_broadcast(verdict);
  refusal = from_bytes(verdict).get<std::string>();
  if (!refusal.empty()) {
    if (rank == 0) throw ConfigError(fmt::format("the pipeline cannot start: {}", refusal));
    mpi_exit(1);
  }

  const int32_t num_blocks = cfg["num_blocks"].get<int32_t>();
  const int32_t block_size = cfg["block_size"].get<int32_t>();
  const auto kv_type = static_cast<DType>(cfg["kv_type"].get<int>());
  const int32_t max_tokens = cfg["max_batched_tokens"].get<int32_t>();
  ModelLoadOptions lo{.use_mmap = !mo.no_mmap,
                      .mlock = mo.mlock,
                      .repack = !mo.no_repack,
                      .placements = {{"host", begin, end}},
                      .stage_begin = begin,
                      .stage_end = end};
  if (rank == 0) {
    // As load_engine, with the first stage's layers.
    EngineSetup s = load_engine(mo, po, ep, &lo);
    StepLimits lim;
    lim.n_vocab = ep.hparams.n_vocab;
    lim.n_embd = ep.hparams.n_embd;
    lim.block_size = block_size;
    lim.max_tokens = max_tokens;
    lim.max_logit_rows = cfg["max_logit_rows"].get<int64_t>();
    s.link = std::make_unique<MpiPipelineLink>(lim, link_timeout());
    s.model->set_pipeline_link(s.link.get());
    std::fprintf(stderr, "pipeline: %d ranks; rank 0 runs layers %d-%d\n", ranks, begin, end - 1);
    return s;
  }
  // A later stage: load, allocate, serve steps, exit. Rank 0 decides when
  // the job ends (mpirun forwards SIGTERM/SIGINT to every rank): it shuts
  // the pipeline down after its own shutdown, and mpirun kills what is left
  // if rank 0 dies.
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  try {
    auto model = ModelRunner::load(ep.path, lo);
    ThreadPool pool(mo.threads > 0 ? mo.threads : ThreadPool::physical_cores());
    KvGroups groups = model->kv_groups();
    std::vector<int32_t> group_blocks = {num_blocks};
    for (int32_t g = 1; g < groups.n_groups(); ++g)
      group_blocks.push_back(window_group_blocks(groups.windows[static_cast<size_t>(g)], block_size,
                                                 cfg["max_num_seqs"].get<int32_t>(), max_tokens,
                                                 num_blocks));
    const ModelRunner& m = *model;
    KvCacheStorage kv(model->kv_shape(num_blocks, block_size, kv_type), model->placements(),
                      [&m](const std::string& d) { return m.backend_for_device(d); },
                      groups.n_groups() > 1 ? &groups : nullptr, group_blocks);
    StepLimits lim;
    lim.n_vocab = ep.hparams.n_vocab;
    lim.n_embd = ep.hparams.n_embd;
    lim.block_size = block_size;
    lim.group_blocks = group_blocks;
    lim.max_tokens = max_tokens;
    lim.max_logit_rows = cfg["max_logit_rows"].get<int64_t>();
    model->reserve_workspace(max_tokens, lim.max_logit_rows);
    mpi_exit(run_pipeline_worker(*model, kv, pool, lim));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", rank, e.what());
    mpi_exit(1);
  }
}

}  // namespace pagellm::cli
