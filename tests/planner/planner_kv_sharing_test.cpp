// KV sharing (Gemma 4): a layer that reads an earlier layer's cache keeps none
// and costs nothing where it runs. The runner hands it the source's view,
// which its device must address: devices of host memory read each other's, a
// GPU only its own. So the planner keeps a GPU's readers and sources together.
#include <gtest/gtest.h>

#include <string>

#include "planner/plan_format.h"
#include "planner/device_map.h"
#include "planner_fixtures.h"

namespace pagellm {
namespace {

using namespace test;

// 8 layers of 64 MiB, 32 KiB of KV per token each; layers 6 and 7 read
// layers 4 and 5's caches (as Gemma 4's last layers do).
ModelFootprint sharing_model() {
  ModelFootprint fp = synth_model(8, 64 * kMiB, 32 * kKiB);
  fp.layer_kv_bytes_per_token.assign(8, 32 * kKiB);
  fp.layer_kv_source.assign(8, -1);
  for (int32_t l : {6, 7}) {
    fp.layer_kv_bytes_per_token[static_cast<size_t>(l)] = 0;
    fp.layer_kv_source[static_cast<size_t>(l)] = l - 2;
  }
  return fp;
}

TEST(PlannerKvSharing, ReadersCostNothingWhereTheyRun) {
  const ModelFootprint fp = sharing_model();
  PlanRequest req = request(1024, 4);
  req.kv_mode = KvMode::kTokens;
  req.kv_tokens = 1024;
  // Readers on the host, their sources on a virtual CPU device: both host memory.
  req.device_map = parse_device_map("0-5:cpu:0,6-7:host");
  const Plan p = make_plan(req, fp, {vcpu(0, 4 * kGiB), host(64 * kGiB)});
  EXPECT_EQ(p.devices[0].kv_bytes, 6 * 32 * kKiB * 1024);
  EXPECT_EQ(p.devices[1].kv_bytes, 0u);
  EXPECT_EQ(p.shared_kv_layers, 2);
  EXPECT_EQ(p.all_layers_kv_bytes_per_token, 6 * 32 * kKiB);
  EXPECT_EQ(p.unshared_kv_bytes_per_token, 8 * 32 * kKiB);
  EXPECT_NE(format_plan_table(p).find("KV sharing: 2 of 8 layers read an earlier layer's cache"),
            std::string::npos)
      << format_plan_table(p);
}

TEST(PlannerKvSharing, AGpuKeepsReadersWithTheirSources) {
  const ModelFootprint fp = sharing_model();
  const PlanRequest req = request(1024, 4);
  // Room on the GPU for 6 layers and their cache: without sharing it takes
  // layers 0-5; with it, 0-5 would leave 6-7 on the host reading the GPU's
  // caches, so it takes 0-3 (its readers' sources stay with them on the host).
  const uint64_t room = 6 * 64 * kMiB + 6 * 32 * kKiB * 1024 + 16 * kMiB;
  const std::vector<PlanDevice> devs = {gpu(0, room), host(64 * kGiB)};
  ModelFootprint plain = synth_model(8, 64 * kMiB, 32 * kKiB);
  EXPECT_EQ(make_plan(req, plain, devs).device_map(), "0-5:cuda:0,6-7:host");
  EXPECT_EQ(make_plan(req, fp, devs).device_map(), "0-3:cuda:0,4-7:host");
  // With room for all of it, the GPU takes every layer.
  const std::vector<PlanDevice> big = {gpu(0, 16 * kGiB), host(64 * kGiB)};
  EXPECT_EQ(make_plan(req, fp, big).device_map(), "0-7:cuda:0");
  // A map that splits a reader from its source over a GPU's boundary is refused.
  for (const char* map : {"0-5:cuda:0,6-7:host", "0-6:cuda:0,7:host"}) {
    PlanRequest m = req;
    m.device_map = parse_device_map(map);
    const std::string err = config_error(m, fp, big);
    EXPECT_NE(err.find("KV cache it reads, on different devices, but cuda:0 has memory of its own"),
              std::string::npos)
        << map << ": " << err;
  }
  PlanRequest ok = req;
  ok.device_map = parse_device_map("0-3:cuda:0,4-7:host");
  EXPECT_EQ(config_error(ok, fp, big), "no error");
}

}  // namespace
}  // namespace pagellm
