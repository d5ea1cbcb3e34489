// Hybrid models in the planner: recurrent layers keep no K/V but a fixed
// state per sequence slot (max_num_seqs of them) on the device that runs
// them. Block counts by hand, where the state goes, refusals that name it,
// the plan's text and JSON, and the footprint of the arch2026 qwen35 file
// against its README's shapes.
#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "planner/plan_format.h"
#include "planner/planner.h"
#include "planner_fixtures.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

using namespace test;

// 4 layers of 100 B, layers 0-2 recurrent (`state` bytes per sequence
// each), layer 3 attention with 8 B of K/V per token.
ModelFootprint hybrid(uint64_t state) {
  ModelFootprint fp = synth_model(4, 100, 8);
  fp.layer_recurrent = {true, true, true, false};
  fp.state_bytes_per_seq_layer = state;
  return fp;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(PlannerState, BlocksLeftAfterTheStateByHand) {
  // Host only, budget 100,000: fixed 400 B of weights, the state 3 x 120 x
  // seqs, the one attention layer 8 x 16 = 128 B per block.
  for (const int32_t seqs : {1, 4, 32}) {
    PlanRequest req = request(1 << 20, seqs);
    req.kv_mode = KvMode::kMemory;  // no cap from max_seq_len x max_num_seqs
    req.kv_mem_bytes = uint64_t{1} << 40;
    req.min_kv_tokens = 16;
    const std::vector<PlanDevice> devs = {host(100000)};
    const ModelFootprint fp = hybrid(120);
    const Plan p = make_plan(req, fp, devs);
    const uint64_t state = 3 * 120 * static_cast<uint64_t>(seqs);
    EXPECT_EQ(p.num_blocks, static_cast<int32_t>((100000 - 400 - state) / 128)) << seqs;
    EXPECT_EQ(p.devices[0].state_bytes, state);
    EXPECT_EQ(p.devices[0].kv_bytes, uint64_t{128} * p.num_blocks);
    EXPECT_EQ(p.kv_bytes_per_token, 8u);  // only the attention layer
    EXPECT_EQ(p.recurrent_layers, 3);
    EXPECT_EQ(p.state_bytes_per_seq, 360u);
    EXPECT_EQ(budget_violations(p, req, devs, &fp), "");
  }
}

TEST(PlannerState, StateLivesWithItsLayers) {
  PlanRequest req = request(64, 4);
  req.device_map = parse_device_map("0-1:cpu:0,2-3:host");
  const ModelFootprint fp = hybrid(50);
  const std::vector<PlanDevice> devs = {vcpu(0, 100000), host(1000000)};
  const Plan p = make_plan(req, fp, devs);
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.devices[0].state_bytes, 2u * 50 * 4);
  EXPECT_EQ(p.devices[0].kv_bytes, 0u);  // two recurrent layers: no K/V
  EXPECT_EQ(p.devices[1].state_bytes, 1u * 50 * 4);
  EXPECT_EQ(p.devices[1].kv_bytes, uint64_t{8} * p.kv_tokens);
  EXPECT_EQ(p.state_bytes(), 3u * 50 * 4);
  EXPECT_EQ(budget_violations(p, req, devs, &fp), "");
  // One KV group of the one attention layer.
  ASSERT_EQ(p.kv_groups.size(), 1u);
  EXPECT_EQ(p.kv_groups[0].layers, 1);
}

TEST(PlannerState, TheSearchMovesLayersForTheState) {
  // A device that holds every layer's weights but not with 32 sequences'
  // state: the recurrent layers it cannot hold go to the host.
  PlanRequest req = request(16, 32);
  req.min_kv_tokens = 16;
  const ModelFootprint fp = hybrid(100);  // 3,200 B per recurrent layer
  const std::vector<PlanDevice> devs = {vcpu(0, 400 + 2 * 3200 + 1000), host(1000000)};
  const Plan p = make_plan(req, fp, devs);
  EXPECT_EQ(p.host_layers(), 2);
  EXPECT_EQ(p.devices[0].state_bytes, 2u * 3200);
  EXPECT_EQ(budget_violations(p, req, devs, &fp), "");
  // With 1 sequence the state fits: everything on the device.
  req.max_num_seqs = 1;
  EXPECT_EQ(make_plan(req, fp, devs).host_layers(), 0);
}

TEST(PlannerState, RefusalNamesTheState) {
  // The state of 100,000 sequences (36 MB) does not fit a 1 MB host.
  PlanRequest req = request(64, 100000);
  const std::vector<PlanDevice> devs = {host(1000000)};
  try {
    make_plan(req, hybrid(120), devs);
    FAIL() << "no refusal";
  } catch (const PlanError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "recurrent state of 3 layers")) << msg;
    EXPECT_TRUE(contains(msg, "--max-num-seqs 100000")) << msg;
    EXPECT_EQ(e.largest_kv_tokens(), -1) << msg;
  }
  // A model without recurrent layers says nothing of a state.
  try {
    make_plan(req, synth_model(4, 1000000, 8), devs);
    FAIL() << "no refusal";
  } catch (const PlanError& e) {
    EXPECT_FALSE(contains(e.what(), "recurrent")) << e.what();
  }
}

TEST(PlannerState, TextAndJsonShowTheState) {
  PlanRequest req = request(64, 4);
  req.device_map = parse_device_map("0-1:cpu:0,2-3:host");
  const Plan p = make_plan(req, hybrid(50), {vcpu(0, 100000), host(1000000)});
  const std::string text = format_plan_table(p);
  EXPECT_TRUE(contains(text.substr(0, text.find('\n')), "  state ")) << text;
  EXPECT_TRUE(contains(text, "recurrent state: 3 of 4 layers recurrent (no KV), 150 B per sequence "
                             "x 4 slots (max_num_seqs) = 600 B"))
      << text;
  EXPECT_TRUE(contains(format_plan_summary(p), "recurrent state 600 B (4 slots)"));
  const nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["recurrent_layers"], 3);
  EXPECT_EQ(j["state_bytes_per_sequence"], 150);
  EXPECT_EQ(j["state_slots"], 4);
  EXPECT_EQ(j["state_bytes"], 600);
  EXPECT_EQ(j["devices"][0]["state_bytes"], 400);
  EXPECT_EQ(j["devices"][1]["state_bytes"], 200);
  // Attention-only models keep the table as it was: no state column.
  const Plan plain = make_plan(request(64, 4), synth_model(4, 100, 8), {host(1000000)});
  const std::string t = format_plan_table(plain);
  EXPECT_FALSE(contains(t, "state")) << t;
  EXPECT_EQ(plan_to_json(plain)["state_bytes"], 0);
}

// The qwen35 file of ../shared/golden/arch2026: its README gives the shapes
// (ssm.conv_kernel 4, state_size 32, group_count 2, time_step_rank 4,
// inner_size 128, recurrent_layers [T,T,T,F], 2 KV heads of 64).
TEST(PlannerState, Arch2026Qwen35Footprint) {
  const std::string file = shared_path("golden/arch2026/rand-qwen35-tok512-F32.gguf");
  if (file.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent";
  auto f = GgufFile::open(file);
  const ModelHParams hp = ModelHParams::from_gguf(*f);
  const ModelFootprint fp = model_footprint(*f, hp);
  EXPECT_EQ(fp.layer_recurrent, (std::vector<bool>{true, true, true, false}));
  // conv: (4 - 1) x (2 x 2 x 32 + 128) floats; delta: 4 heads x 32 x 32.
  const uint64_t floats = 3 * (2 * 2 * 32 + 128) + 4 * 32 * (128 / 4);
  EXPECT_EQ(fp.state_bytes_per_seq_layer, floats * 4);
  PlanRequest req = request(512, 8);
  const Plan p = make_plan(req, fp, {host(uint64_t{1} << 30)});
  EXPECT_EQ(p.kv_bytes_per_token, uint64_t{2 * 2 * 64 * 2});  // one layer's f16 K and V
  EXPECT_EQ(p.state_bytes(), 3 * floats * 4 * 8);
}

}  // namespace
}  // namespace pagellm
