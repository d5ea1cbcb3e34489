// --device-map parsing and resolution.
#include "planner/device_map.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace pagellm {
namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_device_map(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::string resolve_error(const std::string& text, int32_t n, const std::vector<Device>& devs) {
  try {
    resolve_device_map(parse_device_map(text), n, devs);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

const std::vector<Device> kDevs = {Device{DeviceKind::kCpu, 0, 1 << 30},
                                   Device{DeviceKind::kCpu, 1, 1 << 30}, Device::host()};

TEST(DeviceMap, Parses) {
  DeviceMap m = parse_device_map("0-11:cpu:0, 12-23:cpu:1,24:host");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].first_layer, 0);
  EXPECT_EQ(m[0].last_layer, 11);
  EXPECT_EQ(m[0].device.name(), "cpu:0");
  EXPECT_EQ(m[1].first_layer, 12);
  EXPECT_EQ(m[2].first_layer, 24);
  EXPECT_EQ(m[2].last_layer, 24);
  EXPECT_TRUE(m[2].device.is_host());
  EXPECT_EQ(format_device_map(m), "0-11:cpu:0,12-23:cpu:1,24:host");
  EXPECT_EQ(parse_device_map("0-3:cuda:1")[0].device.name(), "cuda:1");
}

TEST(DeviceMap, SyntaxErrors) {
  EXPECT_NE(parse_error("0-11").find("expected FIRST-LAST:DEVICE"), std::string::npos);
  EXPECT_NE(parse_error("a-b:cpu:0").find("expected FIRST-LAST:DEVICE"), std::string::npos);
  EXPECT_NE(parse_error("5-3:cpu:0").find("5 is after 3"), std::string::npos);
  EXPECT_NE(parse_error("0-3:gpu:0").find("expected host, cpu:N or cuda:N"), std::string::npos);
  EXPECT_NE(parse_error("0-3:cpu:0,").find("empty entry"), std::string::npos);
  EXPECT_NE(parse_error("").find("empty entry"), std::string::npos);
}

TEST(DeviceMap, Resolves) {
  auto r = resolve_device_map(parse_device_map("12-23:cpu:1,0-11:cpu:0"), 24, kDevs);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].begin, 0);
  EXPECT_EQ(r[0].end, 12);
  EXPECT_EQ(r[1].begin, 12);
  EXPECT_EQ(r[1].end, 24);
  EXPECT_TRUE(r[2].empty());
  // Touching entries for one device merge.
  r = resolve_device_map(parse_device_map("0-3:cpu:0,4-7:cpu:0,8-9:host"), 10, kDevs);
  EXPECT_EQ(r[0].end, 8);
  EXPECT_EQ(r[2].size(), 2);
}

TEST(DeviceMap, ResolutionErrors) {
  EXPECT_EQ(resolve_error("0-11:cpu:0,12-23:cpu:1", 30, kDevs),
            "--device-map does not map layers 24-29 (the model has 30 layers; map every layer, "
            "using host for layers on the CPU)");
  EXPECT_EQ(resolve_error("0-11:cpu:0,13-23:cpu:1", 24, kDevs),
            "--device-map does not map layer 12 (the model has 24 layers; map every layer, using "
            "host for layers on the CPU)");
  EXPECT_EQ(resolve_error("0-12:cpu:0,12-23:cpu:1", 24, kDevs),
            "--device-map maps layer 12 twice (cpu:0 and cpu:1)");
  EXPECT_EQ(resolve_error("0-24:cpu:0", 24, kDevs),
            "--device-map maps layer 24 to cpu:0, but the model has 24 layers (0-23)");
  EXPECT_EQ(resolve_error("0-3:cpu:0,4-7:cpu:1,8-11:cpu:0", 12, kDevs),
            "--device-map gives cpu:0 layers 0-3 and 8-11: a device holds one contiguous range");
  EXPECT_EQ(resolve_error("0-11:cuda:0", 12, kDevs),
            "--device-map uses cuda:0, which is not declared (add --device cuda:0)");
}

TEST(DeviceMap, PartsOfASplitGpu) {
  const DeviceMap m = parse_device_map("0-1:cuda:0,2-3:cuda:0.1");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].device.kind, DeviceKind::kCuda);
  EXPECT_EQ(m[0].device.index, 0);
  EXPECT_EQ(m[0].device.part, 0);
  EXPECT_EQ(m[1].device.kind, DeviceKind::kCuda);
  EXPECT_EQ(m[1].device.index, 0);
  EXPECT_EQ(m[1].device.part, 1);
  EXPECT_EQ(format_device_map(m), "0-1:cuda:0,2-3:cuda:0.1");
  // Against the devices of --device cuda:0=40GiB --device cuda:0=20GiB.
  std::vector<Device> split = parse_devices({"cuda:0=40GiB", "cuda:0=20GiB"});
  split.push_back(Device::host());
  const auto r = resolve_device_map(m, 4, split);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].begin, 0);
  EXPECT_EQ(r[0].end, 2);
  EXPECT_EQ(r[1].begin, 2);
  EXPECT_EQ(r[1].end, 4);
  EXPECT_TRUE(r[2].empty());
  EXPECT_EQ(resolve_error("0-1:cuda:0,2-3:cuda:0.2", 4, split),
            "--device-map uses cuda:0.2, which is not declared (it is part 2 of cuda:0: declare "
            "--device cuda:0=SIZE 3 times)");
  EXPECT_NE(parse_error("0-3:cuda:0.x").find("cuda:N.K for part K of a split GPU"),
            std::string::npos);
  EXPECT_NE(parse_error("0-3:cpu:0.1").find("expected cpu:N"), std::string::npos);
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

// "experts:FIRST-LAST:host" entries place MoE experts; they do not map layers.
TEST(DeviceMap, ExpertEntries) {
  const DeviceMap m = parse_device_map("0-9:cpu:0, experts:2-5:host,experts:9:host");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_FALSE(m[0].experts);
  EXPECT_TRUE(m[1].experts);
  EXPECT_EQ(m[1].first_layer, 2);
  EXPECT_EQ(m[1].last_layer, 5);
  EXPECT_EQ(format_device_map(m), "0-9:cpu:0,experts:2-5:host,experts:9:host");
  const auto r = resolve_device_map(m, 10, {Device{DeviceKind::kCpu, 0, 1 << 30}, Device::host()});
  EXPECT_EQ(r[0].size(), 10);
  const std::vector<bool> on_host = resolve_expert_map(m, 10);
  const std::vector<bool> want = {false, false, true, true, true, true, false, false, false, true};
  EXPECT_EQ(on_host, want);
  EXPECT_TRUE(resolve_expert_map(parse_device_map("0-9:cpu:0"), 10).empty());
  // Errors: another device, outside the model, twice, bad syntax.
  EXPECT_THROW(resolve_expert_map(parse_device_map("0-9:cpu:0,experts:0-3:cpu:0"), 10), ConfigError);
  EXPECT_THROW(resolve_expert_map(parse_device_map("experts:8-12:host"), 10), ConfigError);
  EXPECT_THROW(resolve_expert_map(parse_device_map("experts:1-3:host,experts:3:host"), 10),
               ConfigError);
  EXPECT_THROW(parse_device_map("experts:host"), ConfigError);
  EXPECT_THROW(parse_device_map("experts:"), ConfigError);
}

}  // namespace
}  // namespace pagellm
