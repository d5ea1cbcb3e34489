// Planner scenarios: synthetic device sets (GPUs of unequal memory, virtual
// CPU devices, only the host, a host under a cgroup limit), every KV mode,
// automatic and manual placement, --no-cpu-offload, the swap guard, and
// refusals with their messages. Block counts are checked against the brute
// force of planner_fixtures.h.
#include "planner/planner.h"

#include <gtest/gtest.h>

#include "planner/plan_format.h"
#include "planner_fixtures.h"
#include "util/memory_stats.h"
#include "util/sizes.h"

namespace pagellm {
namespace {

using namespace test;

// Runs make_plan and checks it against the brute force and the budgets.
Plan plan_checked(const PlanRequest& req, const ModelFootprint& fp,
                  const std::vector<PlanDevice>& devs) {
  const Plan p = make_plan(req, fp, devs);
  const Expected e = brute_force(req, fp, devs);
  EXPECT_TRUE(e.fits);
  EXPECT_EQ(p.num_blocks, e.blocks);
  EXPECT_EQ(p.host_layers(), e.host_layers);
  EXPECT_EQ(p.kv_tokens, int64_t{p.num_blocks} * p.block_size);
  EXPECT_EQ(budget_violations(p, req, devs), "");
  return p;
}

std::string refusal(const PlanRequest& req, const ModelFootprint& fp,
                    const std::vector<PlanDevice>& devs, int64_t* largest = nullptr) {
  try {
    make_plan(req, fp, devs);
  } catch (const PlanError& e) {
    if (largest) *largest = e.largest_kv_tokens();
    return e.what();
  }
  return "no refusal";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---- small cases computed by hand ----

TEST(Planner, BalancesUnequalDevicesByHand) {
  // 4 layers of 100 B, 1 B of KV per token per layer, blocks of 1 token.
  // cpu:0 holds a layers, cpu:1 4-a: a=1 -> 66 blocks, a=2 -> 150, a=3 -> 233, a=4 -> 150.
  const ModelFootprint fp = synth_model(4, 100, 1);
  PlanRequest req = request(100000, 1, 1);
  req.min_kv_tokens = 1;
  const std::vector<PlanDevice> devs = {vcpu(0, 1000), vcpu(1, 500), host(10000)};
  const Plan p = plan_checked(req, fp, devs);
  EXPECT_EQ(p.num_blocks, 233);
  ASSERT_EQ(p.devices.size(), 3u);
  EXPECT_EQ(p.devices[0].name(), "cpu:0");
  EXPECT_EQ(p.devices[0].first_layer, 0);
  EXPECT_EQ(p.devices[0].last_layer, 2);
  EXPECT_EQ(p.devices[0].kv_bytes, 3u * 233);
  EXPECT_EQ(p.devices[0].free_after_bytes, 1u);
  EXPECT_EQ(p.devices[1].first_layer, 3);
  EXPECT_EQ(p.devices[1].last_layer, 3);
  EXPECT_EQ(p.devices[1].free_after_bytes, 500u - 333);
  EXPECT_EQ(p.devices[2].first_layer, -1);
  EXPECT_EQ(p.devices[2].last_layer, -1);
  // The host's RAM is shared with cpu:0 and cpu:1.
  EXPECT_EQ(p.devices[2].free_after_bytes, 10000u - 999 - 333);
  EXPECT_EQ(p.binding_limit, BindingLimit::kDeviceMemory);
  EXPECT_EQ(p.binding_device, "cpu:0");
  EXPECT_EQ(p.device_map(), "0-2:cpu:0,3:cpu:1");
}

TEST(Planner, SwapGuardCountsVirtualDevicesTogether) {
  // Same, but host RAM (which cpu:0 and cpu:1 share) has 1200 B: 400 + 4B <= 1200.
  const ModelFootprint fp = synth_model(4, 100, 1);
  PlanRequest req = request(100000, 1, 1);
  req.min_kv_tokens = 1;
  const std::vector<PlanDevice> devs = {vcpu(0, 1000), vcpu(1, 500), host(1200)};
  const Plan p = plan_checked(req, fp, devs);
  EXPECT_EQ(p.num_blocks, 200);
  EXPECT_EQ(p.binding_limit, BindingLimit::kHostMemory);
  EXPECT_EQ(p.binding_device, "host");
  EXPECT_TRUE(contains(p.binding_detail, "shared by cpu:0, cpu:1, host")) << p.binding_detail;
  EXPECT_EQ(p.devices[2].free_after_bytes, 0u);
  // Asking for more is refused, naming host RAM.
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 250;
  int64_t largest = 0;
  const std::string msg = refusal(req, fp, devs, &largest);
  EXPECT_EQ(largest, 200);
  EXPECT_TRUE(contains(msg, "a KV cache of 250 tokens (250 blocks of 1) does not fit")) << msg;
  EXPECT_TRUE(contains(msg,
                       "largest cache that fits: 200 tokens; or free 50 B on cpu:0 and 200 B of "
                       "host RAM (shared by cpu:0, cpu:1, host) (with layers 0-2 on cpu:0, layer 3 "
                       "on cpu:1)"))
      << msg;
}

TEST(Planner, SwapGuardWithFakeProbe) {
  // A GPU-less machine with 9 GiB available and two virtual devices of 8 GiB
  // each: each fits alone, together they would swap.
  FakeProbe probe = FakeProbe::with_host(9 * kGiB);
  const auto devs = measure_devices(
      {Device{DeviceKind::kCpu, 0, 8 * kGiB}, Device{DeviceKind::kCpu, 1, 8 * kGiB}}, probe, 0);
  const ModelFootprint fp = synth_model(8, 256 * kMiB, 64 * kKiB);  // 2 GiB of weights
  PlanRequest req = request(4096, 64);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 16384;  // 8 GiB of KV: 10 GiB in all, 5 GiB on each device
  EXPECT_TRUE(contains(refusal(req, fp, devs), "host RAM")) << refusal(req, fp, devs);
  req.kv_tokens = 12288;  // 6 GiB of KV: 8 GiB in all
  const Plan p = plan_checked(req, fp, devs);
  EXPECT_EQ(p.kv_tokens, 12288);
  uint64_t shared = 0;
  for (const auto& d : p.devices) shared += d.used_bytes();
  EXPECT_LE(shared, 9 * kGiB);
}

TEST(Planner, SwapGuardOnThisMachineAllocatesNothing) {
  // A virtual device whose cap is far beyond this machine's RAM: the cap
  // would hold the cache, host RAM would not. The refusal comes from the
  // numbers alone; memory use does not grow.
  SystemProbe probe;
  const auto devs = measure_devices({Device{DeviceKind::kCpu, 0, uint64_t{64} << 40}}, probe);
  const uint64_t avail = devs.back().free_bytes;
  const ModelFootprint fp = synth_model(8, 16 * kMiB, 64 * kKiB);  // 512 KiB per token
  PlanRequest req = request(int64_t{1} << 30, 1);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = static_cast<int64_t>(2 * avail / (512 * kKiB));  // twice the RAM available
  const uint64_t rss_before = current_rss_bytes();
  int64_t largest = 0;
  const std::string msg = refusal(req, fp, devs, &largest);
  EXPECT_TRUE(contains(msg, "of host RAM (shared by cpu:0, host)")) << msg;
  EXPECT_GT(largest, 0);
  EXPECT_LT(static_cast<uint64_t>(largest) * 512 * kKiB, avail);
  EXPECT_LT(current_rss_bytes(), rss_before + 64 * kMiB);
}

// ---- 24 GiB + 12 GiB GPUs and a 64 GiB host ----

struct TwoGpus : ::testing::Test {
  TwoGpus() {
    FakeProbe probe = FakeProbe::with_host(64 * kGiB);
    probe.gpus = {{24 * kGiB, 24 * kGiB}, {12 * kGiB, 12 * kGiB}};
    devs = measure_devices({}, probe);  // every GPU, default headroom
    // A 7B-like model: 32 layers of 400 MiB, 16 KiB of f16 KV per token per layer.
    fp = synth_model(32, 400 * kMiB, 16 * kKiB, 256 * kMiB, 250 * kMiB, 250 * kMiB);
    fp.host_workspace_bytes = 64 * kMiB;
    fp.output_workspace_bytes = 16 * kMiB;
  }
  std::vector<PlanDevice> devs;
  ModelFootprint fp;
};

// Plans for running the model here take no GPU unless one is declared (the
// engine cannot run layers on one yet; cli/plan_options.cpp refuses a declared one).
TEST(MeasureDevices, WithoutAllGpusOnlyTheHost) {
  FakeProbe probe = FakeProbe::with_host(64 * kGiB);
  probe.gpus = {{24 * kGiB, 24 * kGiB}};
  const auto devs = measure_devices({}, probe, std::nullopt, /*all_gpus=*/false);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_TRUE(devs[0].device.is_host());
  EXPECT_EQ(measure_devices({}, probe).size(), 2u);  // default: every GPU
}

TEST_F(TwoGpus, DefaultHeadroom) {
  ASSERT_EQ(devs.size(), 3u);
  EXPECT_EQ(devs[0].device.name(), "cuda:0");
  EXPECT_EQ(devs[0].headroom_bytes, 24 * kGiB / 20);
  EXPECT_EQ(devs[1].headroom_bytes, 12 * kGiB / 20);
  EXPECT_EQ(devs[2].device.name(), "host");
  EXPECT_EQ(devs[2].headroom_bytes, 64 * kGiB / 20);
  FakeProbe small = FakeProbe::with_host(4 * kGiB);
  EXPECT_EQ(measure_devices({}, small)[0].headroom_bytes, 512 * kMiB);  // the floor
  // A virtual device keeps 5% of its cap.
  EXPECT_EQ(measure_devices({Device{DeviceKind::kCpu, 0, 2 * kGiB}}, small)[0].headroom_bytes,
            2 * kGiB / 20);
}

TEST_F(TwoGpus, AutoKeepsLayersOnGpusAndBalances) {
  const Plan p = plan_checked(request(4096, 64), fp, devs);
  EXPECT_EQ(p.host_layers(), 0);
  EXPECT_EQ(p.devices[0].name(), "cuda:0");
  EXPECT_EQ(p.devices[0].first_layer, 0);
  EXPECT_GT(p.devices[0].n_layers(), p.devices[1].n_layers());
  EXPECT_EQ(p.devices[0].n_layers() + p.devices[1].n_layers(), 32);
  EXPECT_TRUE(p.devices[1].holds_output);
  EXPECT_EQ(p.binding_limit, BindingLimit::kDeviceMemory);
  // About 20 GiB of cache at 512 KiB per token.
  EXPECT_GT(p.kv_tokens, 38000);
  EXPECT_LT(p.kv_tokens, 44000);
  EXPECT_EQ(p.max_concurrent_full_sequences, p.num_blocks / 256);
  // The host holds the embeddings and its workspace only.
  EXPECT_EQ(p.devices[2].weight_bytes, 250 * kMiB);
  EXPECT_EQ(p.devices[2].workspace_bytes, 64 * kMiB);
  EXPECT_EQ(p.devices[2].kv_bytes, 0u);
}

TEST_F(TwoGpus, AutoIsCappedAtMaxSeqLenTimesMaxNumSeqs) {
  const Plan p = plan_checked(request(1024, 4), fp, devs);
  EXPECT_EQ(p.kv_tokens, 4096);
  EXPECT_EQ(p.max_concurrent_full_sequences, 4);
  EXPECT_EQ(p.binding_limit, BindingLimit::kSeqCap);
  EXPECT_EQ(p.host_layers(), 0);
}

TEST_F(TwoGpus, KvTokensThatFit) {
  PlanRequest req = request(4096, 64);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 16000;  // rounded up to whole blocks
  const Plan p = plan_checked(req, fp, devs);
  EXPECT_EQ(p.kv_tokens, 16000);
  EXPECT_EQ(p.num_blocks, 1000);
  EXPECT_EQ(p.binding_limit, BindingLimit::kKvTokens);
  EXPECT_EQ(p.host_layers(), 0);
  // Everything fits on the larger GPU: it takes all layers (no hop to cuda:1).
  EXPECT_EQ(p.devices[0].n_layers(), 32);
  EXPECT_FALSE(p.devices[1].has_layers());
  req.kv_tokens = 16001;
  EXPECT_EQ(plan_checked(req, fp, devs).num_blocks, 1001);
}

TEST_F(TwoGpus, KvTokensReservedFirstThenLayersOffloaded) {
  PlanRequest req = request(4096, 64);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 100000;  // ~49 GiB of cache: more than the GPUs have
  const Plan p = plan_checked(req, fp, devs);
  EXPECT_EQ(p.kv_tokens, 100000);
  EXPECT_GT(p.host_layers(), 0);
  EXPECT_TRUE(p.devices[0].has_layers());
  EXPECT_TRUE(p.devices[1].has_layers());
  EXPECT_EQ(p.devices[2].last_layer, 31);
  EXPECT_TRUE(p.devices[2].holds_output);
}

TEST_F(TwoGpus, KvTokensCappedAtWhatCanBeUsed) {
  PlanRequest req = request(1024, 2);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 100000;
  const Plan p = plan_checked(req, fp, devs);
  EXPECT_EQ(p.kv_tokens, 2048);
  EXPECT_EQ(p.binding_limit, BindingLimit::kSeqCap);
}

TEST_F(TwoGpus, KvTokensTooLargeIsRefusedWithWhatFits) {
  PlanRequest req = request(8192, 64);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 250000;  // 122 GiB of cache
  int64_t largest = 0;
  const std::string msg = refusal(req, fp, devs, &largest);
  const Expected e = brute_force(req, fp, devs);
  EXPECT_FALSE(e.fits);
  EXPECT_EQ(largest, e.largest * 16);
  EXPECT_TRUE(contains(msg,
                       "a KV cache of 250,000 tokens (15,625 blocks of 16) does not fit; "
                       "largest cache that fits: " +
                           format_count(largest) + " tokens; or free "))
      << msg;
}

TEST_F(TwoGpus, KvMemLimitsEachDevice) {
  PlanRequest req = request(4096, 64);
  req.kv_mode = KvMode::kMemory;
  req.kv_mem_bytes = 4 * kGiB;
  const Plan p = plan_checked(req, fp, devs);
  EXPECT_EQ(p.binding_limit, BindingLimit::kKvMem);
  EXPECT_EQ(p.host_layers(), 0);
  for (const auto& d : p.devices) EXPECT_LE(d.kv_bytes, 4 * kGiB);
  // Layers are balanced so the fuller device's share decides: 4 GiB over 16 layers.
  EXPECT_EQ(p.kv_tokens, 4 * kGiB / (16 * 16 * kKiB) / 16 * 16);
}

TEST_F(TwoGpus, KvFractionOfWhatIsFreeAfterWeights) {
  PlanRequest req = request(4096, 64);
  req.kv_mode = KvMode::kFraction;
  req.kv_fraction = 0.5;
  const Plan half = plan_checked(req, fp, devs);
  EXPECT_EQ(half.binding_limit, BindingLimit::kKvFraction);
  req.kv_fraction = 1.0;
  const Plan all = plan_checked(req, fp, devs);
  const Plan autop = plan_checked(request(4096, 64), fp, devs);
  EXPECT_EQ(all.num_blocks, autop.num_blocks);
  EXPECT_NEAR(static_cast<double>(half.num_blocks) / all.num_blocks, 0.5, 0.05);
}

TEST_F(TwoGpus, NoCpuOffloadShrinksTheCacheInstead) {
  PlanRequest req = request(4096, 64);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 100000;
  req.no_cpu_offload = true;
  const Plan p = plan_checked(req, fp, devs);
  EXPECT_EQ(p.host_layers(), 0);
  EXPECT_LT(p.kv_tokens, 100000);
  EXPECT_EQ(p.binding_limit, BindingLimit::kDeviceMemory);
  EXPECT_TRUE(contains(p.binding_detail, "--no-cpu-offload")) << p.binding_detail;
  // Down to --min-kv-tokens, not below.
  req.min_kv_tokens = p.kv_tokens + 16;
  const std::string msg = refusal(req, fp, devs);
  EXPECT_TRUE(contains(msg, "largest cache that fits without CPU offload (--no-cpu-offload): " +
                                format_count(p.kv_tokens) + " tokens, less than --min-kv-tokens"))
      << msg;
  EXPECT_TRUE(contains(msg, "with CPU offload, ")) << msg;
}

TEST_F(TwoGpus, ModelTooLargeForGpusOffloadsTheFewestLayers) {
  // 64 layers of 600 MiB: 37.5 GiB, more than both GPUs.
  ModelFootprint big = synth_model(64, 600 * kMiB, 16 * kKiB, 256 * kMiB, 250 * kMiB, 250 * kMiB);
  const Plan p = plan_checked(request(4096, 64), big, devs);
  EXPECT_GT(p.host_layers(), 0);
  EXPECT_GE(p.kv_tokens, 4096);  // one full sequence, the default --min-kv-tokens
  PlanRequest req = request(4096, 64);
  req.no_cpu_offload = true;
  const std::string msg = refusal(req, big, devs);
  EXPECT_TRUE(contains(msg, "without CPU offload (--no-cpu-offload)")) << msg;
  EXPECT_TRUE(contains(msg, "the model does not fit even without a KV cache")) << msg;
  EXPECT_TRUE(contains(msg, "with CPU offload, ")) << msg;
}

// With room to spare in either order the plans tie, and the user's order wins.
TEST_F(TwoGpus, UserOrderWinsTies) {
  std::vector<PlanDevice> small_first = {gpu(0, 12 * kGiB, 512 * kMiB),
                                         gpu(1, 24 * kGiB, 512 * kMiB), host(64 * kGiB, 512 * kMiB)};
  const Plan p = plan_checked(request(1024, 2), fp, small_first);
  ASSERT_EQ(p.binding_limit, BindingLimit::kSeqCap);
  EXPECT_EQ(p.devices[0].name(), "cuda:0");
  EXPECT_EQ(p.devices[1].name(), "cuda:1");
  std::swap(small_first[0], small_first[1]);
  const Plan q = plan_checked(request(1024, 2), fp, small_first);
  EXPECT_EQ(q.devices[0].name(), "cuda:1");
  EXPECT_EQ(q.num_blocks, p.num_blocks);
}

// Three capped devices of 400, 900 and 1200 MiB: the device with the last
// layers also holds the output head and its workspace, so the order that
// puts the largest device last holds more blocks than most-free-first.
TEST(Planner, DeviceOrderIsPartOfTheSearch) {
  ModelFootprint fp = synth_model(12, 100 * kMiB, 64 * kKiB, 16 * kMiB, 100 * kMiB, 300 * kMiB);
  fp.output_workspace_bytes = 100 * kMiB;
  const std::vector<PlanDevice> devs = {vcpu(0, 400 * kMiB), vcpu(1, 900 * kMiB),
                                        vcpu(2, 1200 * kMiB), host(64 * kGiB, 1 * kGiB)};
  PlanRequest req = request(4096, 64);
  req.no_cpu_offload = true;
  req.min_kv_tokens = 16;
  const Plan p = plan_checked(req, fp, devs);
  const Expected all = brute_force(req, fp, devs);
  std::vector<PlanDevice> most_free_first = {devs[2], devs[1], devs[0], devs[3]};
  const Expected fixed = brute_force(req, fp, most_free_first, /*all_orders=*/false);
  ASSERT_TRUE(all.fits && fixed.fits);
  EXPECT_EQ(p.num_blocks, all.blocks);
  std::printf("best order %s: %d blocks; most free first: %lld blocks (+%.0f%%)\n",
              p.device_map().c_str(), p.num_blocks, static_cast<long long>(fixed.blocks),
              100.0 * (static_cast<double>(p.num_blocks) / static_cast<double>(fixed.blocks) - 1));
  EXPECT_GT(p.num_blocks, fixed.blocks * 11 / 10);
  // The output head ends up on the device with the most room, not the 400 MiB one.
  for (const auto& d : p.devices) {
    if (d.holds_output) {
      EXPECT_NE(d.name(), "cpu:0");
    }
  }
  // --device-map pins the order: the given one, even when another holds more.
  PlanRequest pinned = req;
  pinned.device_map = parse_device_map("0-1:cpu:0,2-7:cpu:2,8-11:cpu:1");
  const Plan m = make_plan(pinned, fp, devs);
  EXPECT_EQ(budget_violations(m, pinned, devs), "");
  EXPECT_EQ(m.device_of_layer(0).name(), "cpu:0");
  EXPECT_EQ(m.device_of_layer(2).name(), "cpu:2");
  EXPECT_EQ(m.device_of_layer(11).name(), "cpu:1");
  EXPECT_LE(m.num_blocks, p.num_blocks);
}

// Interchangeable devices are one order (the user's); beyond 720 distinct
// orders the search tries the user's, most-free-first and each device last.
TEST(Planner, ManyDevicesKeepTheSearchSmall) {
  ModelFootprint fp = synth_model(4, 100 * kMiB, 64 * kKiB, 16 * kMiB, 100 * kMiB, 300 * kMiB);
  fp.output_workspace_bytes = 100 * kMiB;
  std::vector<PlanDevice> same, distinct;
  for (int i = 0; i < 8; ++i) {
    same.push_back(vcpu(i, 600 * kMiB));
    distinct.push_back(vcpu(i, (300 + 100 * static_cast<uint64_t>(i)) * kMiB));
  }
  same.push_back(host(64 * kGiB, 1 * kGiB));
  distinct.push_back(host(64 * kGiB, 1 * kGiB));
  PlanRequest req = request(4096, 64);
  req.no_cpu_offload = true;
  req.min_kv_tokens = 16;
  const Plan p = make_plan(req, fp, same);
  EXPECT_EQ(budget_violations(p, req, same), "");
  for (int i = 0; i < 8; ++i) EXPECT_EQ(p.devices[static_cast<size_t>(i)].name(), "cpu:" + std::to_string(i));
  const Plan q = make_plan(req, fp, distinct);
  EXPECT_EQ(budget_violations(q, req, distinct), "");
  std::vector<PlanDevice> most_free_first(distinct.rbegin() + 1, distinct.rend());
  most_free_first.push_back(distinct.back());
  const Expected fixed = brute_force(req, fp, most_free_first, /*all_orders=*/false);
  ASSERT_TRUE(fixed.fits);
  EXPECT_GE(q.num_blocks, fixed.blocks);
}

// Mixture of experts: 8 layers of 10 MiB attention and 90 MiB experts. A
// 300 MiB device holds every layer's attention and KV, and the experts of the
// first layers as far as the cache floor allows; the rest of the experts run
// on the host. --device-map can pin experts to the host.
TEST(Planner, ExpertsGoWhereAttentionAndTheCacheLeaveRoom) {
  ModelFootprint fp = synth_model(8, 100 * kMiB, 8 * kKiB, 8 * kMiB, 50 * kMiB, 20 * kMiB);
  fp.layer_expert_bytes.assign(8, 90 * kMiB);
  fp.expert_read_fraction = 0.25;
  fp.host_expert_workspace_bytes = 4 * kMiB;
  fp.embedding_bytes = 50 * kMiB;  // the host's weights: read by rows
  const std::vector<PlanDevice> devs = {vcpu(0, 300 * kMiB), host(16 * kGiB, 1 * kGiB)};
  PlanRequest req = request(1024, 4);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 1024;  // 64 MiB of KV over 8 layers
  const Plan p = make_plan(req, fp, devs);
  EXPECT_EQ(p.host_layers(), 0);  // attention of every layer on the device
  ASSERT_EQ(p.experts_on_host.size(), 8u);
  const int32_t kept = 8 - p.expert_layers_on_host();
  // 300 MiB - 80 MiB attention - 64 MiB KV - 20 MiB output - 8 MiB workspace: room for one.
  EXPECT_EQ(kept, 1);
  EXPECT_FALSE(p.experts_on_host[0]);
  for (int32_t l = kept; l < 8; ++l) EXPECT_TRUE(p.experts_on_host[static_cast<size_t>(l)]);
  EXPECT_EQ(p.devices[0].expert_bytes, kept * 90 * kMiB);
  EXPECT_EQ(p.devices[1].expert_bytes, (8 - kept) * 90 * kMiB);
  EXPECT_EQ(p.device_map(), "0-7:cpu:0,experts:1-7:host");
  EXPECT_EQ(budget_violations(p, req, devs, &fp), "");
  // A token reads the attention, the output head and a quarter of the experts.
  uint64_t read = 0;
  for (const auto& d : p.devices) read += d.read_bytes_per_token;
  EXPECT_EQ(read, 8 * 10 * kMiB + 20 * kMiB + 8 * 90 * kMiB / 4);
  // The plan's map as --device-map gives the same plan.
  PlanRequest pinned = req;
  pinned.device_map = parse_device_map(p.device_map());
  const Plan q = make_plan(pinned, fp, devs);
  EXPECT_EQ(q.experts_on_host, p.experts_on_host);
  EXPECT_EQ(q.num_blocks, p.num_blocks);
  // Without the experts to spare, the device would have held fewer layers.
  ModelFootprint dense = fp;
  dense.layer_expert_bytes.clear();
  const Plan d = make_plan(req, dense, devs);
  EXPECT_GT(d.host_layers(), 0);
  // --no-cpu-offload keeps experts with their layers (here: too large for
  // the device, so the cache could not fit).
  req.no_cpu_offload = true;
  req.min_kv_tokens = 16;
  EXPECT_THROW(make_plan(req, fp, devs), PlanError);
  const Plan n = make_plan(req, fp, {vcpu(0, 2 * kGiB), host(16 * kGiB, 1 * kGiB)});
  EXPECT_EQ(n.expert_layers_on_host(), 0);
  EXPECT_TRUE(n.experts_on_host.empty());
  // Two such devices: the layers are split so that both keep experts (all on
  // the first would keep one layer's), four layers' in all.
  const std::vector<PlanDevice> two = {vcpu(0, 300 * kMiB), vcpu(1, 300 * kMiB),
                                       host(16 * kGiB, 1 * kGiB)};
  req.no_cpu_offload = false;
  const Plan t = make_plan(req, fp, two);
  EXPECT_EQ(budget_violations(t, req, two, &fp), "");
  EXPECT_TRUE(t.devices[0].has_layers() && t.devices[1].has_layers()) << t.device_map();
  EXPECT_GT(t.devices[0].expert_bytes, 0u) << t.device_map();
  EXPECT_GT(t.devices[1].expert_bytes, 0u) << t.device_map();
  EXPECT_EQ(8 - t.expert_layers_on_host(), 4) << t.device_map();
  // Experts may be pinned to the host only.
  pinned.device_map = parse_device_map("0-7:cpu:0,experts:0-3:cpu:0");
  EXPECT_THROW(make_plan(pinned, fp, devs), ConfigError);
}

// ---- 80 + 80 + 40 GiB ----

TEST(Planner, ThreeUnequalGpus) {
  const std::vector<PlanDevice> devs = {gpu(0, 80 * kGiB, 4 * kGiB), gpu(1, 80 * kGiB, 4 * kGiB),
                                        gpu(2, 40 * kGiB, 2 * kGiB), host(256 * kGiB, 12 * kGiB)};
  // A 70B-like model at 8 bits: 80 layers of 860 MiB, GQA KV of 4 KiB per token per layer.
  const ModelFootprint fp = synth_model(80, 860 * kMiB, 4 * kKiB, 512 * kMiB, 1 * kGiB, 1 * kGiB);
  const Plan p = plan_checked(request(8192, 64), fp, devs);
  EXPECT_EQ(p.host_layers(), 0);
  // Devices by name: the planner chooses their pipeline order.
  auto layers_on = [&](const std::string& name) {
    for (const auto& d : p.devices)
      if (d.name() == name) return d.n_layers();
    ADD_FAILURE() << name << " not in the plan";
    return 0;
  };
  const int a = layers_on("cuda:0"), b = layers_on("cuda:1"), c = layers_on("cuda:2");
  EXPECT_EQ(a + b + c, 80);
  EXPECT_LT(c, a);  // the 40 GiB device holds fewer layers
  EXPECT_LT(c, b);
  EXPECT_EQ(p.binding_limit, BindingLimit::kDeviceMemory);
  // Compare with an even split: balancing must do at least as well.
  const int64_t even = max_blocks_for_placement(request(8192, 64), fp, devs,
                                                {{0, 27}, {27, 54}, {54, 80}, {80, 80}});
  EXPECT_GT(p.num_blocks, even);
}

// A CUDA device that runs layers also holds the cuBLAS scratch, and the host
// the CUDA runtime; a virtual CPU device in the same place needs neither.
TEST(Planner, CudaDevicesCountTheMatmulScratch) {
  ModelFootprint fp = synth_model(8, 100 * kMiB, 4 * kKiB, 64 * kMiB, 100 * kMiB, 200 * kMiB);
  fp.output_workspace_bytes = 16 * kMiB;
  fp.cuda_matmul_scratch_bytes = 300 * kMiB;
  fp.cuda_host_runtime_bytes = 512 * kMiB;
  const Plan on_gpu = plan_checked(request(1024, 4), fp, {gpu(0, 8 * kGiB), host(16 * kGiB)});
  const Plan on_vcpu = plan_checked(request(1024, 4), fp, {vcpu(0, 8 * kGiB), host(16 * kGiB)});
  ASSERT_EQ(on_gpu.devices[0].n_layers(), 8);
  ASSERT_EQ(on_vcpu.devices[0].n_layers(), 8);
  EXPECT_EQ(on_gpu.devices[0].workspace_bytes,
            on_vcpu.devices[0].workspace_bytes + fp.cuda_matmul_scratch_bytes);
  // The host holds the CUDA runtime's memory (cuBLAS, the driver context).
  EXPECT_EQ(on_gpu.devices[1].workspace_bytes,
            on_vcpu.devices[1].workspace_bytes + fp.cuda_host_runtime_bytes);
}

// ---- one GPU split into two parts of unequal memory ----

TEST(Planner, SplitGpuHoldsLayersOnBothPartsWithinTheGpu) {
  // --device cuda:0=40GiB --device cuda:0=20GiB on an 80 GiB GPU with all of
  // it free, and with only 50 GiB free (the second part gets what is left).
  const ModelFootprint fp =
      synth_model(32, 400 * kMiB, 16 * kKiB, 256 * kMiB, 250 * kMiB, 250 * kMiB);
  for (uint64_t gpu_free : {80 * kGiB, 50 * kGiB}) {
    SCOPED_TRACE(format_size(gpu_free) + " free");
    FakeProbe probe = FakeProbe::with_host(64 * kGiB);
    probe.gpus = {{80 * kGiB, gpu_free}};
    const auto devs = measure_devices(parse_devices({"cuda:0=40GiB", "cuda:0=20GiB"}), probe);
    ASSERT_EQ(devs.size(), 3u);
    const Plan p = plan_checked(request(4096, 64), fp, devs);
    EXPECT_EQ(p.host_layers(), 0);
    uint64_t gpu_used = 0;
    int32_t parts = 0;
    for (const auto& d : p.devices) {
      if (d.device.kind != DeviceKind::kCuda) continue;
      ++parts;
      EXPECT_GT(d.n_layers(), 0) << d.name();
      const PlanDevice& in = d.device.part == 0 ? devs[0] : devs[1];
      ASSERT_EQ(in.device, d.device);
      EXPECT_LE(d.used_bytes(), in.budget_bytes()) << d.name();  // free - headroom
      gpu_used += d.used_bytes();
    }
    EXPECT_EQ(parts, 2);
    // Both parts together stay within the GPU's free memory minus one
    // headroom (that of a GPU with the parts' memory).
    const uint64_t one_headroom =
        default_headroom(devs[0].device, std::min(gpu_free, uint64_t{60} * kGiB));
    EXPECT_LE(gpu_used + one_headroom, gpu_free);
    // The plan names the parts apart.
    EXPECT_TRUE(contains(p.device_map(), "cuda:0.1")) << p.device_map();
    EXPECT_TRUE(contains(format_plan_table(p), "\ncuda:0.1 cuda ")) << format_plan_table(p);
  }
}

// ---- only the host ----

TEST(Planner, OnlyHost) {
  const std::vector<PlanDevice> devs = {host(16 * kGiB, 800 * kMiB)};
  const ModelFootprint fp = synth_model(22, 40 * kMiB, 2 * kKiB, 64 * kMiB, 60 * kMiB, 60 * kMiB);
  const Plan p = plan_checked(request(2048, 64), fp, devs);
  ASSERT_EQ(p.devices.size(), 1u);
  EXPECT_EQ(p.devices[0].first_layer, 0);
  EXPECT_EQ(p.devices[0].last_layer, 21);
  EXPECT_EQ(p.host_layers(), 22);
  EXPECT_EQ(p.binding_limit, BindingLimit::kSeqCap);
  EXPECT_EQ(p.kv_tokens, 2048 * 4);  // the host's default: four full-length sequences
  // Asked for, the cache may be larger: max_seq_len x max_num_seqs still caps it.
  PlanRequest big = request(2048, 64);
  big.kv_mode = KvMode::kTokens;
  big.kv_tokens = 2048 * 100;
  EXPECT_EQ(plan_checked(big, fp, devs).kv_tokens, 2048 * 64);
  PlanRequest req = request(2048, 64);
  req.no_cpu_offload = true;
  EXPECT_THROW(make_plan(req, fp, devs), ConfigError);
}

TEST(Planner, TinyHostUnderCgroupLimit) {
  FakeProbe probe = FakeProbe::with_host(60 * kGiB);
  probe.host_info.cgroup_limit = 1 * kGiB;
  probe.host_info.cgroup_usage = 200 * kMiB;
  const auto devs = measure_devices({}, probe);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].free_bytes, 824 * kMiB);
  EXPECT_EQ(devs[0].headroom_bytes, 512 * kMiB);  // max(5% of free, 512 MiB)
  // 240 MiB of layers + 20 MiB of embeddings: 52 MiB left for the cache.
  const ModelFootprint fp = synth_model(8, 30 * kMiB, 16 * kKiB, 0, 20 * kMiB, 0);
  const Plan p = plan_checked(request(256, 64), fp, devs);
  EXPECT_EQ(p.binding_limit, BindingLimit::kHostMemory);
  EXPECT_EQ(p.kv_tokens, 52 * kMiB / (128 * kKiB) / 16 * 16);
  // One sequence of 1024 tokens (128 MiB) does not fit.
  int64_t largest = 0;
  const std::string msg = refusal(request(1024, 64), fp, devs, &largest);
  EXPECT_EQ(largest, p.kv_tokens);
  EXPECT_TRUE(contains(msg, "largest cache that fits: " + format_count(largest) +
                                " tokens, less than one sequence of --max-seq-len 1,024 (1,024 "
                                "tokens); lower --max-seq-len or --min-kv-tokens, or free "))
      << msg;
  EXPECT_TRUE(contains(msg, "of host RAM")) << msg;
  // Weights alone too large.
  const ModelFootprint big = synth_model(8, 64 * kMiB, 16 * kKiB);
  const std::string w = refusal(request(256, 64), big, devs, &largest);
  EXPECT_EQ(largest, -1);
  EXPECT_TRUE(contains(w, "the model does not fit even without a KV cache")) << w;
  EXPECT_TRUE(contains(w, "free 200.00 MiB of host RAM")) << w;
}

// ---- manual device map ----

struct VirtualPair : ::testing::Test {
  VirtualPair() : fp(synth_model(24, 64 * kMiB, 32 * kKiB, 16 * kMiB, 32 * kMiB, 32 * kMiB)) {
    devs = {vcpu(0, 2 * kGiB), vcpu(1, 6 * kGiB), host(20 * kGiB, 1 * kGiB)};
  }
  ModelFootprint fp;
  std::vector<PlanDevice> devs;
};

TEST_F(VirtualPair, ManualMapOverridesPlacement) {
  PlanRequest req = request(1024, 64);
  req.device_map = parse_device_map("0-11:cpu:0,12-23:cpu:1");
  const Plan p = make_plan(req, fp, devs);
  EXPECT_TRUE(p.manual_map);
  EXPECT_EQ(p.device_map(), "0-11:cpu:0,12-23:cpu:1");
  EXPECT_EQ(p.devices[0].name(), "cpu:0");
  EXPECT_EQ(p.devices[0].first_layer, 0);
  EXPECT_EQ(p.devices[0].last_layer, 11);
  EXPECT_EQ(p.devices[1].first_layer, 12);
  EXPECT_EQ(p.host_layers(), 0);
  // cpu:0 binds: 2 GiB - 12 * 64 MiB - 16 MiB for 12 layers of KV.
  EXPECT_EQ(p.binding_device, "cpu:0");
  EXPECT_EQ(p.num_blocks, (2 * kGiB - 12 * 64 * kMiB - 16 * kMiB) / (12 * 32 * kKiB * 16));
  EXPECT_EQ(budget_violations(p, req, devs), "");
  // The automatic plan balances better.
  PlanRequest autoreq = request(1024, 64);
  EXPECT_GT(plan_checked(autoreq, fp, devs).num_blocks, p.num_blocks);
}

TEST_F(VirtualPair, ManualMapRefusalSaysWhatToFree) {
  PlanRequest req = request(1024, 64);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 8192;
  req.device_map = parse_device_map("0-19:cpu:0,20-23:host");
  const std::string msg = refusal(req, fp, devs);
  EXPECT_TRUE(contains(msg,
                       "the --device-map placement (layers 0-19 on cpu:0, layers 20-23 on "
                       "host) does not fit a KV cache of 8,192 tokens; largest cache that "
                       "fits with this map: 1,200 tokens; or free "))
      << msg;
  EXPECT_TRUE(contains(msg, "on cpu:0")) << msg;
  // 24 layers (1.5 GiB), their workspace and the output do not fit in 1 GiB.
  const std::vector<PlanDevice> small = {vcpu(0, 1 * kGiB), vcpu(1, 6 * kGiB), devs[2]};
  req.device_map = parse_device_map("0-23:cpu:0");
  const std::string w = refusal(req, fp, small);
  EXPECT_TRUE(contains(w, "does not fit even without a KV cache; free 560.00 MiB on cpu:0")) << w;
}

TEST_F(VirtualPair, ManualMapErrors) {
  PlanRequest req = request(1024, 64);
  auto config_error = [&](const std::string& map) {
    req.device_map = parse_device_map(map);
    try {
      make_plan(req, fp, devs);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(contains(config_error("0-11:cpu:0,12-23:cpu:2"),
                       "--device-map uses cpu:2, which is not declared (add --device cpu:2=SIZE)"));
  EXPECT_TRUE(contains(config_error("0-11:cpu:0"), "does not map layers 12-23"));
  req.no_cpu_offload = true;
  EXPECT_TRUE(contains(config_error("0-11:cpu:0,12-23:host"),
                       "--device-map puts layers 12-23 on host, but --no-cpu-offload forbids"));
}

TEST_F(VirtualPair, PlanGivesKvPlacements) {
  const Plan p = plan_checked(request(1024, 64), fp, devs);
  for (const auto& d : p.devices) {
    if (!d.has_layers()) continue;
    EXPECT_EQ(p.device_of_layer(d.first_layer).name(), d.name());
    EXPECT_EQ(p.device_of_layer(d.last_layer).name(), d.name());
  }
  EXPECT_THROW(p.device_of_layer(24), Error);
  // Ready for KvCacheStorage: layer order, whatever the device order.
  PlanRequest req = request(1024, 64);
  req.device_map = parse_device_map("0-9:cpu:1,10-19:cpu:0,20-23:host");
  const Plan m = make_plan(req, fp, devs);
  const auto placements = m.kv_placements();
  ASSERT_EQ(placements.size(), 3u);
  EXPECT_EQ(placements[0].device, "cpu:1");
  EXPECT_EQ(placements[0].layer_begin, 0);
  EXPECT_EQ(placements[0].layer_end, 10);
  EXPECT_EQ(placements[1].device, "cpu:0");
  EXPECT_EQ(placements[2].device, "host");
  EXPECT_EQ(placements[2].layer_end, 24);
  KvPoolShape small;
  small.layer_end = m.n_layer;
  small.num_blocks = 2;  // keep the test's allocation tiny
  small.block_size = m.block_size;
  small.n_kv_heads = m.n_kv_heads;
  small.head_dim = m.head_dim;
  small.dtype = m.kv_type;
  KvCacheStorage storage(small, placements);
  EXPECT_EQ(storage.pools().size(), 3u);
  EXPECT_EQ(storage.pool_for_layer(15).shape().layer_begin, 10);
}

TEST(Planner, RejectsBadRequests) {
  const ModelFootprint fp = synth_model(4, 100, 1);
  const std::vector<PlanDevice> devs = {host(10000)};
  PlanRequest req = request(16, 1);
  req.kv_mode = KvMode::kFraction;
  req.kv_fraction = 1.5;
  EXPECT_THROW(make_plan(req, fp, devs), ConfigError);
  req = request(16, 1, 0);
  EXPECT_THROW(make_plan(req, fp, devs), ConfigError);
  req = request(0, 1);
  EXPECT_THROW(make_plan(req, fp, devs), ConfigError);
  req = request(16, 1);
  req.kv_mode = KvMode::kTokens;
  EXPECT_THROW(make_plan(req, fp, devs), ConfigError);                       // no token count
  EXPECT_THROW(make_plan(request(16, 1), fp, {vcpu(0, 100)}), ConfigError);  // no host
}

TEST(Planner, HugeNumbersDoNotOverflow) {
  const ModelFootprint fp = synth_model(4, 100, 1);
  const std::vector<PlanDevice> devs = {host(uint64_t{1} << 40)};
  PlanRequest req = request(int64_t{1} << 62, 1 << 30);
  req.min_kv_tokens = 1;
  const Plan p = make_plan(req, fp, devs);
  EXPECT_EQ(p.num_blocks, INT32_MAX);  // the block count's own limit
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = INT64_MAX;
  EXPECT_EQ(make_plan(req, fp, devs).num_blocks, INT32_MAX);
}

TEST(Planner, FormatsTableAndJson) {
  const ModelFootprint fp = synth_model(4, 100 * kMiB, 16 * kKiB, 8 * kMiB);
  const std::vector<PlanDevice> devs = {vcpu(0, 1 * kGiB), host(4 * kGiB, 512 * kMiB)};
  const Plan p = make_plan(request(512, 8), fp, devs);
  const std::string t = format_plan_table(p);
  EXPECT_TRUE(contains(t, "device   kind   layers     weights    KV cache")) << t;
  EXPECT_TRUE(contains(t, "cpu:0    cpu       0-3  400.00 MiB")) << t;
  // No GPU: the default cache holds four full-length sequences.
  EXPECT_TRUE(contains(t, "KV cache: 128 blocks x 16 tokens = 2,048 tokens")) << t;
  EXPECT_TRUE(contains(t, "max_seq_len 512: 4 concurrent full-length sequences")) << t;
  EXPECT_TRUE(contains(t, "binding limit: max_seq_len_x_max_num_seqs (max_seq_len x 4 = 512 x 4 "
                          "tokens: the host's default cache")) << t;
  const nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["num_blocks"], 128);
  EXPECT_EQ(j["kv_tokens"], 2048);
  EXPECT_EQ(j["devices"][0]["weight_bytes"], 400 * kMiB);
  EXPECT_EQ(j["devices"][1]["first_layer"], -1);
  EXPECT_EQ(j["devices"][1]["last_layer"], -1);
  EXPECT_EQ(j["binding_limit"], "max_seq_len_x_max_num_seqs");
  const nlohmann::json e = plan_error_to_json(PlanError("no room", 128));
  EXPECT_EQ(e["error"], "no room");
  EXPECT_EQ(e["largest_kv_tokens"], 128);
}

}  // namespace
}  // namespace pagellm
