#include "cli/pipeline_setup.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/version.h"
#include "mpi/mpi_pipeline.h"
#include "engine/kv_runtime.h"
#include "planner/model_footprint.h"
#include "planner/node_split.h"
#include "util/sizes.h"
#include "util/error.h"

namespace pagellm::cli {

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

// Parts a step of several sequences is cut into on its way down the
// pipeline (1: whole steps).
int32_t link_micro_batches() {
  if (const char* v = std::getenv("PAGELLM_PIPELINE_MICRO_BATCHES")) {
    const int n = std::atoi(v);
    if (n >= 1 && n <= 64) return n;
    throw ConfigError(fmt::format("PAGELLM_PIPELINE_MICRO_BATCHES must be 1 to 64, not '{}'", v));
  }
  return 1;
}

// What a stage accepts from the rank before it: the steps of an engine
// whose KV runtime is `kv`.
StepLimits stage_limits(const ModelHParams& hp, const KvRuntimeConfig& kv, int32_t state_slots = 0) {
  StepLimits lim;
  lim.state_slots = state_slots;
  lim.n_vocab = hp.n_vocab;
  lim.n_embd = hp.n_embd;
  lim.block_size = kv.block_size;
  for (const CacheGroupSpec& g : kv.groups) lim.group_blocks.push_back(g.num_blocks);
  lim.max_tokens = kv.workspace_tokens;
  lim.max_logit_rows = kv.workspace_rows;
  return lim;
}

}  // namespace

EnginePlan plan_pipeline(const ModelOptions& mo, const PlanOptions& po) {
  const int ranks = mpi_size();
  EnginePlan ep;
  ep.path = mo.path();
  auto meta = GgufFile::open(ep.path);
  ep.hparams = ModelHParams::from_gguf(*meta);
  const ModelHParams& hp = ep.hparams;
  PlanOptions opts = po;
  opts.repack = !mo.no_repack;
  const ModelFootprint fp = model_footprint(*meta, hp, opts.footprint_options());
  ep.weight_bytes = fp.total_weight_bytes();
  const PlanRequest req = opts.request(hp);  // validates the flags
  if (!po.device_map.empty())
    throw ConfigError("under MPI the layers are placed by the plan: --device-map is not supported "
                      "there (--device applies to every rank)");
  if (req.kv_mode == KvMode::kMemory || req.kv_mode == KvMode::kFraction)
    throw ConfigError("under MPI the cache is sized in tokens: use -c/--kv-tokens (or nothing) "
                      "instead of --kv-mem/--kv-fraction");
  SystemProbe probe;
  // Every rank declares the same --device flags and measures its own.
  std::vector<PlanDevice> devs = opts.measure_devices(probe);
  PlanDevice& host = devs.back();
  // PAGELLM_NODE_MEMORY=SIZE caps what this rank plans with (set it per rank
  // through the launcher, e.g. a wrapper script per rank or mpirun -x).
  if (const char* cap = std::getenv("PAGELLM_NODE_MEMORY")) {
    const uint64_t bytes = parse_size(cap);
    if (bytes < host.free_bytes) {
      host.free_bytes = bytes;
      host.headroom_bytes = bytes / 20;
    }
  }
  // Every rank's host and build, on every rank: each computes the same plan.
  nlohmann::json dev_free = nlohmann::json::array();
  for (const PlanDevice& d : devs) dev_free.push_back({d.free_bytes, d.headroom_bytes});
  const nlohmann::json mine = {{"free", host.free_bytes},
                               {"headroom", host.headroom_bytes},
                               {"devices", dev_free},
                               {"version", version_line()},
                               {"model_bytes", std::filesystem::file_size(ep.path)}};
  nlohmann::json all = nlohmann::json::array();
  for (const auto& b : mpi_gather(to_bytes(mine))) all.push_back(from_bytes(b));
  std::vector<uint8_t> bytes = to_bytes(all);
  mpi_broadcast(bytes);
  all = from_bytes(bytes);
  // From here every rank works on the same data and meets the same refusal.
  struct FailTogether {
    int before = std::uncaught_exceptions();
    ~FailTogether() {
      if (std::uncaught_exceptions() > before) mpi_failing_together();
    }
  } together;
  for (int r = 1; r < ranks; ++r) {
    const auto& n = all[static_cast<size_t>(r)];
    if (n["version"] != all[0]["version"])
      throw ConfigError(fmt::format("the pipeline cannot start: rank {} runs {}, rank 0 runs {}", r,
                                    n["version"].get<std::string>(), all[0]["version"].get<std::string>()));
    if (n["model_bytes"] != all[0]["model_bytes"])
      throw ConfigError(fmt::format(
          "the pipeline cannot start: rank {}'s model file {} ({} bytes) differs from rank 0's ({} bytes)",
          r, ep.path, n["model_bytes"].get<uint64_t>(), all[0]["model_bytes"].get<uint64_t>()));
  }

  const int32_t L = hp.n_layer, bs = req.block_size;
  const int64_t max_seq_len = req.max_seq_len > 0 ? req.max_seq_len : hp.n_ctx_train;
  const int64_t seq_blocks = (max_seq_len + bs - 1) / bs;
  NodeSplitInput in;
  in.layer_weight_bytes = fp.layer_weight_bytes;
  // Recurrent layers keep no K/V but their state for every sequence slot, on their rank.
  for (int32_t l = 0; l < L; ++l) {
    in.layer_kv_bytes_per_token.push_back(fp.layer_kv_bytes(l));
    in.layer_state_bytes.push_back(
        fp.recurrent(l) ? fp.state_bytes_per_seq_layer * static_cast<uint64_t>(req.max_num_seqs) : 0);
  }
  in.block_size = bs;
  for (int r = 0; r < ranks; ++r) {
    const auto& n = all[static_cast<size_t>(r)];
    const uint64_t free = n["free"], headroom = n["headroom"];
    // Host RAM (virtual CPU devices are carved out of it) plus the node's GPUs.
    uint64_t budget = free > headroom ? free - headroom : 0;
    for (size_t i = 0; i + 1 < devs.size(); ++i)
      if (!devs[i].device.shares_host_memory()) {
        const uint64_t f = n["devices"][i][0], h = n["devices"][i][1];
        budget += f > h ? f - h : 0;
      }
    in.node_budget.push_back(budget);
    uint64_t fixed = fp.layer_workspace_bytes;
    if (r == 0) fixed += fp.host_weight_bytes;
    if (r == ranks - 1) fixed += fp.output_weight_bytes + fp.output_workspace_bytes + fp.host_workspace_bytes;
    in.node_fixed.push_back(fixed);
  }
  if (req.kv_mode == KvMode::kTokens) {
    in.max_blocks = in.min_blocks = (req.kv_tokens + bs - 1) / bs;
  } else {
    in.max_blocks = seq_blocks * std::min(req.max_num_seqs, kHostDefaultSeqs);
    const int64_t min_tokens = req.min_kv_tokens > 0 ? req.min_kv_tokens : max_seq_len;
    in.min_blocks = (min_tokens + bs - 1) / bs;
  }
  int64_t largest = -1;
  const auto split = split_layers(in, &largest);
  if (!split) {
    if (L < ranks)
      throw PlanError(fmt::format("{} ranks for a {}-layer model: each rank needs a layer", ranks, L), -1);
    if (largest < 0)
      throw PlanError(fmt::format("the model's weights{} do not fit the {} nodes' memory (budgets {})",
                                  fp.n_recurrent() == 0
                                      ? std::string()
                                      : fmt::format(" and recurrent state ({} per sequence x "
                                                    "--max-num-seqs {})",
                                                    format_size(fp.state_bytes_per_seq()),
                                                    req.max_num_seqs),
                                  ranks, [&] {
                                    std::string b;
                                    for (size_t r = 0; r < in.node_budget.size(); ++r)
                                      b += fmt::format("{}node {}: {}", r ? ", " : "", r,
                                                       format_size(in.node_budget[r]));
                                    return b;
                                  }()),
                      -1);
    throw PlanError(fmt::format("the {} nodes hold a KV cache of at most {} tokens; {} were asked "
                                "(lower -c / --max-seq-len, or add a node)",
                                ranks, format_count(largest * bs), format_count(in.min_blocks * bs)),
                    largest * bs);
  }
  // A layer that reads an earlier layer's cache (Gemma 4) needs that cache in
  // its own process: the runner hands it the source's view.
  for (int r = 0; r < ranks; ++r)
    for (int32_t l = split->stages[static_cast<size_t>(r)].first,
                 e = split->stages[static_cast<size_t>(r)].second;
         l < e; ++l)
      if (fp.kv_source(l) >= 0 && fp.kv_source(l) < split->stages[static_cast<size_t>(r)].first)
        throw ConfigError(fmt::format(
            "the pipeline puts layer {} on rank {} but the KV cache it reads (layer {}'s) on an earlier "
            "rank: models whose layers share KV run on one node for now",
            l, r, fp.kv_source(l)));
  Plan& p = ep.plan;
  p.nodes = ranks;
  p.n_layer = L;
  p.block_size = bs;
  p.num_blocks = static_cast<int32_t>(split->blocks);
  p.kv_tokens = split->blocks * bs;
  p.max_seq_len = max_seq_len;
  p.max_num_seqs = req.max_num_seqs;
  p.max_concurrent_full_sequences = seq_blocks > 0 ? split->blocks / seq_blocks : 0;
  p.kv_mode = req.kv_mode;
  p.kv_type = fp.kv_type;
  p.n_kv_heads = hp.n_head_kv;
  p.head_dim = hp.head_dim;
  set_kv_sharing(p, fp);
  p.kv_bytes_per_token = p.all_layers_kv_bytes_per_token;  // the split charges every layer every token
  p.latent_kv = fp.latent_kv;
  p.gqa_kv_bytes_per_token = fp.gqa_kv_bytes_per_token_layer * static_cast<uint64_t>(L - fp.n_recurrent());
  p.recurrent_layers = fp.n_recurrent();
  p.state_bytes_per_seq = fp.state_bytes_per_seq();
  p.kv_groups = plan_kv_groups(fp, bs, req.max_num_seqs, split->blocks);
  if (split->binding_node >= 0) {
    p.binding_limit = BindingLimit::kHostMemory;
    p.binding_device = fmt::format("node{}:host", split->binding_node);
    p.binding_detail = fmt::format("node {}'s host memory holds no more cache with its layers",
                                   split->binding_node);
  } else {
    p.binding_limit = req.kv_mode == KvMode::kTokens ? BindingLimit::kKvTokens : BindingLimit::kSeqCap;
    p.binding_detail = req.kv_mode == KvMode::kTokens ? "--kv-tokens as asked"
                                                      : "max_seq_len x the host default of sequences";
  }
  const uint64_t tokens = static_cast<uint64_t>(p.kv_tokens);
  const auto layer_kv = [&](int32_t l) { return tokens * in.layer_kv_bytes_per_token[static_cast<size_t>(l)]; };
  const auto layer_state = [&](int32_t l) { return in.layer_state_bytes[static_cast<size_t>(l)]; };
  const auto layer_bytes = [&](int32_t l) {
    return fp.layer_weight_bytes[static_cast<size_t>(l)] + layer_kv(l) + layer_state(l);
  };
  // d holds layers [first, end) (and the output layer when `output`): their
  // weights, cache, state and workspace.
  const auto hold_layers = [&](DevicePlan& d, int32_t first, int32_t end, bool output) {
    d.first_layer = first;
    d.last_layer = end - 1;
    d.holds_output = output;
    for (int32_t l = first; l < end; ++l) {
      d.weight_bytes += fp.layer_weight_bytes[static_cast<size_t>(l)];
      d.kv_bytes += layer_kv(l);
      d.state_bytes += layer_state(l);
    }
    if (output) d.weight_bytes += fp.output_weight_bytes;
    d.workspace_bytes = fp.layer_workspace_bytes + (output ? fp.output_workspace_bytes : 0);
  };
  for (int r = 0; r < ranks; ++r) {
    const auto [b, e] = split->stages[static_cast<size_t>(r)];
    const auto& node = all[static_cast<size_t>(r)]["devices"];
    // As on one machine: as many of the stage's layers as fit on the node's
    // declared devices, in order, the rest on its host.
    uint64_t shared_host_use = 0;  // virtual CPU devices use host RAM
    int32_t next = b;
    for (size_t i = 0; i + 1 < devs.size(); ++i) {
      const uint64_t f = node[i][0], h = node[i][1];
      const uint64_t budget = f > h ? f - h : 0;
      uint64_t used = fp.layer_workspace_bytes;
      int32_t take = next;
      while (take < e && used + layer_bytes(take) + (take + 1 == L ? fp.output_weight_bytes : 0) <= budget)
        used += layer_bytes(take++);
      if (take == next) continue;
      DevicePlan d;
      d.device = devs[i].device;
      d.node = r;
      hold_layers(d, next, take, take == L);
      d.free_bytes = f;
      d.headroom_bytes = h;
      d.free_after_bytes = f > d.used_bytes() ? f - d.used_bytes() : 0;
      d.read_bytes_per_token = d.weight_bytes;
      if (devs[i].device.shares_host_memory()) shared_host_use += d.used_bytes();
      p.devices.push_back(d);
      next = take;
    }
    DevicePlan d;
    d.device = host.device;
    d.node = r;
    d.free_bytes = all[static_cast<size_t>(r)]["free"];
    d.headroom_bytes = all[static_cast<size_t>(r)]["headroom"];
    if (next < e) hold_layers(d, next, e, r == ranks - 1);
    if (r == 0) d.weight_bytes += fp.host_weight_bytes;
    if (r == ranks - 1) d.workspace_bytes += fp.host_workspace_bytes;
    const uint64_t host_use = d.used_bytes() + shared_host_use;
    if (host_use > (d.free_bytes > d.headroom_bytes ? d.free_bytes - d.headroom_bytes : 0))
      throw PlanError(fmt::format("node {}: its host would hold {} with its devices' share, over its "
                                  "{} (free {} minus headroom {}); fewer tokens (-c) or another split "
                                  "of its devices",
                                  r, format_size(host_use),
                                  format_size(d.free_bytes > d.headroom_bytes ? d.free_bytes - d.headroom_bytes : 0),
                                  format_size(d.free_bytes), format_size(d.headroom_bytes)),
                      -1);
    d.free_after_bytes = d.free_bytes > host_use ? d.free_bytes - host_use : 0;
    d.read_bytes_per_token = d.weight_bytes;
    p.devices.push_back(d);
  }
  return ep;
}

EngineSetup load_pipeline_engine(const ModelOptions& mo, const PlanOptions& po, const EnginePlan& ep,
                                 const RunOptions& run) {
  const int rank = mpi_rank(), ranks = mpi_size();
  if (ep.plan.nodes != ranks)
    throw ConfigError("the pipeline's plan has no stage for every rank (plan with plan_engine under MPI)");
  // Every rank's config follows the same plan: rank 0's engine names blocks
  // that exist in every rank's pools.
  const EngineConfig cfg = engine_config(ep.plan, po, run);
  const std::vector<KvPoolPlacement> placements = ep.plan.node_placements(rank);
  if (placements.empty()) throw ConfigError(fmt::format("the pipeline's plan gives rank {} no layers", rank));
  ModelLoadOptions lo{.use_mmap = !mo.no_mmap,
                      .mlock = mo.mlock,
                      .repack = !mo.no_repack,
                      .placements = placements,
                      .stage_begin = placements.front().layer_begin,
                      .stage_end = placements.back().layer_end};
  if (rank == 0) {
    // As load_engine, with the first stage's layers.
    EngineSetup s = load_engine(mo, po, ep, run, &lo);
    const int32_t parts = link_micro_batches();
    s.link = std::make_unique<MpiPipelineLink>(
        stage_limits(ep.hparams, s.config.kv_runtime(*s.model)), link_timeout(), parts);
    s.model->set_pipeline_link(s.link.get());
    std::string stages;
    for (int r = 0; r < ranks; ++r) {
      const auto node = ep.plan.node_placements(r);
      stages += fmt::format("{}rank {}: layers {}-{}", r ? ", " : "", r, node.front().layer_begin,
                            node.back().layer_end - 1);
    }
    std::fprintf(stderr, "pipeline: %d ranks (%s)%s\n", ranks, stages.c_str(),
                 parts > 1 ? fmt::format(", steps in up to {} parts", parts).c_str() : "");
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
    // The same KV groups and workspace as rank 0's engine, on this stage's layers.
    KvRuntime kv(*model, cfg.kv_runtime(*model));
    mpi_exit(run_pipeline_worker(*model, kv.storage(), pool,
                                 stage_limits(ep.hparams, kv.config(), kv.state_slot_count())));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", rank, e.what());
    mpi_exit(1);
  }
}

}  // namespace pagellm::cli
