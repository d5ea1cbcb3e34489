// Device names and --device parsing.
#include "device/device.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace pagellm {
namespace {

TEST(Device, Names) {
  EXPECT_EQ(Device::host().name(), "host");
  EXPECT_TRUE(Device::host().is_host());
  EXPECT_TRUE(Device::host().shares_host_memory());
  Device v{DeviceKind::kCpu, 3, uint64_t{1} << 30};
  EXPECT_EQ(v.name(), "cpu:3");
  EXPECT_TRUE(v.is_virtual());
  EXPECT_TRUE(v.shares_host_memory());
  Device g{DeviceKind::kCuda, 1, std::nullopt};
  EXPECT_EQ(g.name(), "cuda:1");
  EXPECT_FALSE(g.shares_host_memory());
  EXPECT_STREQ(g.backend_name(), "cuda");
  EXPECT_STREQ(v.backend_name(), "cpu");
  Device part{DeviceKind::kCuda, 1, uint64_t{1} << 30, 2};
  EXPECT_EQ(part.name(), "cuda:1.2");
  EXPECT_EQ(part.physical_index(), 1);
  EXPECT_FALSE(part == g);
  part.part = 0;
  EXPECT_EQ(part, g);  // the cap is not part of a device's identity
}

TEST(Device, ParsesVirtualAndCudaDevices) {
  Device d = parse_device("cpu:0=2GiB");
  EXPECT_EQ(d.kind, DeviceKind::kCpu);
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.memory_cap, uint64_t{2} << 30);
  d = parse_device("cpu:12=512MiB");
  EXPECT_EQ(d.index, 12);
  EXPECT_EQ(d.memory_cap, uint64_t{512} << 20);
  d = parse_device("cuda:1");
  EXPECT_EQ(d.kind, DeviceKind::kCuda);
  EXPECT_EQ(d.index, 1);
  EXPECT_FALSE(d.memory_cap);
  d = parse_device("cuda:0=20GiB");
  EXPECT_EQ(d.memory_cap, uint64_t{20} << 30);
  EXPECT_EQ(parse_device_name(" host "), Device::host());
}

TEST(Device, RejectsBadSpecs) {
  auto msg = [](const std::string& s) {
    try {
      parse_device(s);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("cpu:0").find("needs a memory size, e.g. cpu:0=2GiB"), std::string::npos);
  EXPECT_NE(msg("gpu:0=1GiB").find("expected host, cpu:N or cuda:N"), std::string::npos);
  EXPECT_NE(msg("cpu:x=1GiB").find("expected cpu:N"), std::string::npos);
  EXPECT_NE(msg("cpu:=1GiB").find("expected cpu:N"), std::string::npos);
  EXPECT_NE(msg("cpu:0=lots").find("invalid size 'lots'"), std::string::npos);
  EXPECT_NE(msg("cpu:0=0").find("size is zero"), std::string::npos);
  EXPECT_NE(msg("host").find("the host is always used"), std::string::npos);
  EXPECT_NE(msg("host=1GiB").find("the host is always used"), std::string::npos);
}

TEST(Device, ParsesDeviceLists) {
  auto ds = parse_devices({"cpu:0=2GiB", "cpu:1=6GiB", "cuda:0"});
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[1].name(), "cpu:1");
  EXPECT_EQ(ds[1].memory_cap, uint64_t{6} << 30);
  try {
    parse_devices({"cpu:0=2GiB", "cpu:0=1GiB"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "device cpu:0 is declared twice");
  }
}

std::string devices_error(const std::vector<std::string>& specs) {
  try {
    parse_devices(specs);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Device, GpuDeclaredAgainIsSplitIntoParts) {
  auto ds = parse_devices({"cuda:0=40GiB", "cpu:0=1GiB", "cuda:0=20GiB", "cuda:1"});
  ASSERT_EQ(ds.size(), 4u);
  EXPECT_EQ(ds[0].name(), "cuda:0");
  EXPECT_EQ(ds[0].part, 0);
  EXPECT_EQ(ds[0].memory_cap, uint64_t{40} << 30);
  EXPECT_EQ(ds[2].name(), "cuda:0.1");
  EXPECT_EQ(ds[2].kind, DeviceKind::kCuda);
  EXPECT_EQ(ds[2].physical_index(), 0);
  EXPECT_EQ(ds[2].part, 1);
  EXPECT_EQ(ds[2].memory_cap, uint64_t{20} << 30);
  EXPECT_FALSE(ds[0] == ds[2]);
  EXPECT_EQ(ds[3].name(), "cuda:1");
  EXPECT_EQ(ds[3].part, 0);
  // A third declaration is part 2; the names parse back to the same devices.
  ds = parse_devices({"cuda:0=1GiB", "cuda:0=2GiB", "cuda:0=3GiB"});
  ASSERT_EQ(ds.size(), 3u);
  for (int32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(ds[static_cast<size_t>(k)].part, k);
    EXPECT_EQ(parse_device_name(ds[static_cast<size_t>(k)].name()), ds[static_cast<size_t>(k)]);
  }
  EXPECT_EQ(ds[2].name(), "cuda:0.2");
}

TEST(Device, SplitGpuNeedsASizeOnEveryDeclaration) {
  const std::string two =
      "device cuda:0 is declared 2 times: each declaration of a split GPU needs a size, e.g. "
      "cuda:0=40GiB";
  EXPECT_EQ(devices_error({"cuda:0=40GiB", "cuda:0"}), two);
  EXPECT_EQ(devices_error({"cuda:0", "cuda:0=20GiB"}), two);
  EXPECT_EQ(devices_error({"cuda:0", "cuda:0"}), two);
  EXPECT_EQ(devices_error({"cuda:3=1GiB", "cuda:3=1GiB", "cuda:3"}),
            "device cuda:3 is declared 3 times: each declaration of a split GPU needs a size, "
            "e.g. cuda:3=40GiB");
  // A GPU declared once needs none; the CPU devices still may be declared once.
  EXPECT_EQ(devices_error({"cuda:0", "cuda:1=1GiB", "cuda:1=2GiB"}), "no error");
  EXPECT_EQ(devices_error({"cpu:1=1GiB", "cuda:1=1GiB", "cpu:1=2GiB"}),
            "device cpu:1 is declared twice");
}

TEST(Device, ParsesPartNames) {
  Device d = parse_device_name("cuda:0.1");
  EXPECT_EQ(d.kind, DeviceKind::kCuda);
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.part, 1);
  EXPECT_EQ(d.name(), "cuda:0.1");
  d = parse_device_name(" cuda:12.10 ");
  EXPECT_EQ(d.index, 12);
  EXPECT_EQ(d.part, 10);
  EXPECT_EQ(parse_device_name("cuda:2.0"), parse_device_name("cuda:2"));
  auto msg = [](const std::string& s) {
    try {
      parse_device_name(s);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string bad_part =
      "expected cuda:N with N a device number, or cuda:N.K for part K of a split GPU";
  EXPECT_EQ(msg("cuda:0.x"), "invalid device 'cuda:0.x': " + bad_part);
  EXPECT_NE(msg("cuda:0.").find(bad_part), std::string::npos);
  EXPECT_NE(msg("cuda:.1").find(bad_part), std::string::npos);
  EXPECT_NE(msg("cuda:0.1.2").find(bad_part), std::string::npos);
  EXPECT_NE(msg("cuda:0.1234").find(bad_part), std::string::npos);
  // Virtual CPU devices are already distinct by N, and the host is one.
  EXPECT_EQ(msg("cpu:0.1"), "invalid device 'cpu:0.1': expected cpu:N with N a device number");
  EXPECT_NE(msg("host.1").find("expected host, cpu:N or cuda:N"), std::string::npos);
  // A part is declared by declaring its GPU again, not by its name.
  try {
    parse_device("cuda:0.1=20GiB");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "invalid device 'cuda:0.1=20GiB': to split cuda:0 into parts, declare it once per "
                 "part (--device cuda:0=SIZE each time); its second declaration is named cuda:0.1");
  }
}

}  // namespace
}  // namespace pagellm
