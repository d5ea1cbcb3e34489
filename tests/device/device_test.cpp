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

}  // namespace
}  // namespace pagellm
