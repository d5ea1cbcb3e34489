// The plan's cache bytes are what the runtime allocates: for hybrid models
// (qwen35 from ../shared/golden/arch2026, qwen35 and qwen35moe written by
// make-model), MLA (deepseek2), Gemma 4 (per-layer KV shapes, KV sharing)
// and an attention-only one, each device's planned KV and
// recurrent-state bytes equal the bytes of the pools KvRuntime builds there
// from the plan (EngineConfig::from_plan), whether the planner places the
// layers or a device map does.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "engine/engine_runner.h"
#include "engine/hybrid_models.h"
#include "engine/kv_runtime.h"
#include "gguf/gguf_reader.h"
#include "planner/cost_model.h"
#include "planner/planner.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

struct Bytes {
  uint64_t kv = 0, state = 0;
};

// What the runtime's storage holds on each device (by the placement that
// covers a pool's first layer).
std::map<std::string, Bytes> runtime_bytes(const KvCacheStorage& s) {
  auto device_of = [&s](int32_t layer) {
    for (const KvPoolPlacement& p : s.placements())
      if (layer >= p.layer_begin && layer < p.layer_end) return p.device;
    return std::string("?");
  };
  std::map<std::string, Bytes> out;
  for (const auto& p : s.pools()) {
    const int32_t first = p->shape().layers.empty() ? p->shape().layer_begin : p->shape().layers[0];
    out[device_of(first)].kv += p->shape().total_bytes();
  }
  for (const auto& p : s.state_pools()) out[device_of(p->shape().layers.front())].state += p->bytes();
  return out;
}

// Plans `file` for `seqs` sequences over cpu:0, cpu:1 and the host (with
// `map`, or placed by the planner), builds the runtime from the plan, and
// compares the bytes per device.
void check(const std::string& file, const std::string& map, int32_t seqs, bool prefix_caching) {
  SCOPED_TRACE(file + " map '" + map + "' seqs " + std::to_string(seqs) +
               (prefix_caching ? " with" : " without") + " prefix caching");
  auto meta = GgufFile::open(file);
  const ModelHParams hp = ModelHParams::from_gguf(*meta);
  FootprintOptions fo;
  fo.max_batched_tokens = 64;
  fo.max_num_seqs = seqs;
  PlanRequest req;
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 400;
  req.max_seq_len = 256;
  req.max_num_seqs = seqs;
  req.prefix_caching = prefix_caching;
  if (!map.empty()) req.device_map = parse_device_map(map);
  const uint64_t GiB = uint64_t{1} << 30;
  // A device holds about half the layers: the planner splits the model.
  const ModelFootprint fp = model_footprint(*meta, hp, fo);
  uint64_t kv_token = 0;  // one token over every layer's own cache
  for (int32_t l = 0; l < hp.n_layer; ++l) kv_token += fp.layer_kv_bytes(l);
  const uint64_t dev = fp.total_layer_weight_bytes() / 2 + fp.layer_workspace_bytes +
                       fp.output_weight_bytes + fp.output_workspace_bytes + kv_token * 416 +
                       fp.state_bytes_per_seq() *
                           static_cast<uint64_t>(seqs + planner_detail::checkpoint_plan(fp, req).entries) +
                       (uint64_t{64} << 10);
  const Plan plan = make_plan(req, fp,
                              {PlanDevice{Device{DeviceKind::kCpu, 0, dev}, dev, 0},
                               PlanDevice{Device{DeviceKind::kCpu, 1, dev}, dev, 0},
                               PlanDevice{Device::host(), 8 * GiB, GiB}});
  Loaded m = load(file, {.placements = plan.kv_placements()});
  RunOptions run;
  run.max_batched_tokens = 64;
  run.prefix_caching = prefix_caching;  // with it, hybrids keep state checkpoints the plan charges
  const EngineConfig cfg = EngineConfig::from_plan(plan, run);
  KvRuntime kv(*m.model, cfg.kv_runtime(*m.model));
  const std::map<std::string, Bytes> got = runtime_bytes(kv.storage());
  int with_layers = 0;
  for (const DevicePlan& d : plan.devices) {
    if (!d.has_layers()) continue;
    ++with_layers;
    const auto it = got.find(d.name());
    const Bytes b = it == got.end() ? Bytes{} : it->second;
    EXPECT_EQ(d.kv_bytes, b.kv) << d.name();
    EXPECT_EQ(d.state_bytes, b.state) << d.name();
  }
  EXPECT_EQ(plan.kv_bytes() + plan.state_bytes(), kv.storage().total_bytes());
  EXPECT_EQ(plan.state_bytes() > 0, hp.has_recurrent());
  if (map.empty()) EXPECT_GT(with_layers, 1) << plan.device_map();
}

TEST(PlanCacheBytes, EqualTheRuntimesPerDevice) {
  std::vector<std::string> files = {hybrid_model("qwen35", 8), hybrid_model("qwen35moe", 8),
                                    data_path("stories260K.gguf")};
  const std::string golden = shared_path("golden/arch2026/rand-qwen35-tok512-F32.gguf");
  if (!golden.empty()) files.push_back(golden);
  // MLA: a latent cache (one row per token and layer, no V).
  const std::string mla = shared_path("golden/arch2026/rand-deepseek2-tok512-F32.gguf");
  if (!mla.empty()) files.push_back(mla);
  // Gemma 4: sliding and full layers of different KV shapes, the last layers
  // reading an earlier layer's cache (none of their own; with the map below
  // the sharing layers run on other devices than their sources). make-model's
  // (8 layers: 4-7 share) and the reference file (4 layers: 2-3 share).
  files.push_back(hybrid_model("gemma4", 8));
  const std::string gemma4 = shared_path("golden/arch2026/rand-gemma4-tok512-Q8_0.gguf");
  if (!gemma4.empty()) files.push_back(gemma4);
  for (const std::string& file : files) {
    const int32_t L = ModelHParams::from_gguf(*GgufFile::open(file)).n_layer;
    for (const int32_t seqs : {1, 6}) {
      for (const bool pc : {false, true}) check(file, "", seqs, pc);
      auto range = [](int32_t a, int32_t b) {
        return a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b);
      };
      check(file,
            range(0, L / 2 - 1) + ":cpu:0," + range(L / 2, L - 2) + ":cpu:1," +
                std::to_string(L - 1) + ":host",
            seqs, true);
      check(file, "0-" + std::to_string(L - 1) + ":host", seqs, true);
    }
  }
  if (golden.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent (the make-model files ran)";
}

}  // namespace
}  // namespace pagellm
