// Memory probes: /proc/meminfo and cgroup parsing over fake files, the real
// machine, and FakeProbe.
#include "device/memory_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;

const char* kMeminfo =
    "MemTotal:       24683652 kB\n"
    "MemFree:        23496116 kB\n"
    "MemAvailable:   24089024 kB\n"
    "Buffers:            6072 kB\n"
    "SwapCached:            0 kB\n"
    "SwapTotal:       8388604 kB\n"
    "SwapFree:        8000000 kB\n"
    "HugePages_Total:       0\n";

TEST(MemInfo, ParsesKiloBytes) {
  HostMemoryInfo m = parse_meminfo(kMeminfo);
  EXPECT_EQ(m.mem_total, 24683652 * kKiB);
  EXPECT_EQ(m.mem_available, 24089024 * kKiB);
  EXPECT_EQ(m.swap_total, 8388604 * kKiB);
  EXPECT_EQ(m.swap_free, 8000000 * kKiB);
  EXPECT_FALSE(m.cgroup_limit);
  // Swap never counts: usable is MemAvailable.
  EXPECT_EQ(m.usable_bytes(), 24089024 * kKiB);
  EXPECT_EQ(m.total_bytes(), 24683652 * kKiB);
}

TEST(MemInfo, MissingFieldsAreErrors) {
  EXPECT_THROW(parse_meminfo("MemTotal: 100 kB\n"), FormatError);
  EXPECT_THROW(parse_meminfo(""), FormatError);
}

TEST(MemInfo, CgroupRoomLowersUsable) {
  HostMemoryInfo m = parse_meminfo(kMeminfo);
  m.cgroup_limit = 2 * kGiB;
  m.cgroup_usage = 512 * kMiB;
  EXPECT_EQ(m.cgroup_room(), 1536 * kMiB);
  EXPECT_EQ(m.usable_bytes(), 1536 * kMiB);
  EXPECT_EQ(m.total_bytes(), 2 * kGiB);
  m.cgroup_usage = 3 * kGiB;  // over the limit
  EXPECT_EQ(m.usable_bytes(), 0u);
  m.cgroup_limit = 64 * kGiB;  // limit above MemAvailable: MemAvailable binds
  m.cgroup_usage = 0;
  EXPECT_EQ(m.usable_bytes(), 24089024 * kKiB);
}

TEST(Cgroup, ParsesLimitsAndPaths) {
  EXPECT_EQ(parse_cgroup_limit("max\n"), std::nullopt);
  EXPECT_EQ(parse_cgroup_limit("1073741824\n"), 1073741824u);
  EXPECT_EQ(parse_cgroup_limit("9223372036854771712\n"), std::nullopt);  // v1 "unlimited"
  EXPECT_THROW(parse_cgroup_limit("lots"), FormatError);
  EXPECT_EQ(cgroup_v2_path("0::/user.slice/session-1.scope\n"), "/user.slice/session-1.scope");
  EXPECT_EQ(cgroup_v2_path("4:memory:/docker/abc\n"), "");
  EXPECT_EQ(cgroup_v1_memory_path("5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n"), "/docker/abc");
  EXPECT_EQ(cgroup_v1_memory_path("4:cpuset,memory:/k8s/pod\n"), "/k8s/pod");
  EXPECT_EQ(cgroup_v1_memory_path("0::/a\n"), "");
}

// A fake /proc and /sys/fs/cgroup in a temp directory.
struct FakeFs {
  FakeFs() : dir(".d") {
    std::filesystem::create_directories(dir.path);
    paths.meminfo = dir.path + "/meminfo";
    paths.self_cgroup = dir.path + "/self_cgroup";
    paths.cgroup_root = dir.path + "/cgroup";
    test::write_file(paths.meminfo, kMeminfo);
  }
  ~FakeFs() { std::filesystem::remove_all(dir.path); }
  void file(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = paths.cgroup_root + "/" + rel;
    std::filesystem::create_directories(p.parent_path());
    test::write_file(p.string(), text);
  }
  test::TempPath dir;
  ProcPaths paths;
};

TEST(Cgroup, V2LimitAlongThePathBinds) {
  FakeFs fs;
  test::write_file(fs.paths.self_cgroup, "0::/app.slice/pagellm.service\n");
  fs.file("memory.max", "max\n");  // root: no limit
  fs.file("app.slice/memory.max", "4294967296\n");
  fs.file("app.slice/memory.current", "3221225472\n");  // 1 GiB room
  fs.file("app.slice/pagellm.service/memory.max", "2147483648\n");
  fs.file("app.slice/pagellm.service/memory.current", "536870912\n");  // 1.5 GiB room
  HostMemoryInfo m = read_host_memory(fs.paths);
  EXPECT_EQ(m.mem_available, 24089024 * kKiB);
  EXPECT_EQ(m.cgroup_limit, 4 * kGiB);  // the parent leaves less room
  EXPECT_EQ(m.cgroup_usage, 3 * kGiB);
  EXPECT_EQ(m.usable_bytes(), 1 * kGiB);
}

TEST(Cgroup, V2ContainerRoot) {
  FakeFs fs;
  test::write_file(fs.paths.self_cgroup, "0::/\n");
  fs.file("memory.max", "1073741824\n");
  fs.file("memory.current", "104857600\n");
  HostMemoryInfo m = read_host_memory(fs.paths);
  EXPECT_EQ(m.usable_bytes(), 1 * kGiB - 100 * kMiB);
}

TEST(Cgroup, V1Fallback) {
  FakeFs fs;
  test::write_file(fs.paths.self_cgroup, "4:memory:/docker/abc\n0::/\n");
  fs.file("memory/memory.limit_in_bytes", "9223372036854771712\n");
  fs.file("memory/docker/abc/memory.limit_in_bytes", "3221225472\n");
  fs.file("memory/docker/abc/memory.usage_in_bytes", "1073741824\n");
  HostMemoryInfo m = read_host_memory(fs.paths);
  EXPECT_EQ(m.usable_bytes(), 2 * kGiB);
}

TEST(Cgroup, NoCgroupFilesMeansNoLimit) {
  FakeFs fs;
  HostMemoryInfo m = read_host_memory(fs.paths);
  EXPECT_FALSE(m.cgroup_limit);
  EXPECT_EQ(m.usable_bytes(), 24089024 * kKiB);
}

TEST(MemoryProbe, MissingMeminfoIsAnError) {
  ProcPaths p;
  p.meminfo = "/nonexistent/meminfo";
  EXPECT_THROW(read_host_memory(p), SystemError);
}

TEST(MemoryProbe, RealMachine) {
  SystemProbe probe;
  HostMemoryInfo m = probe.host();
  EXPECT_GT(m.mem_total, 0u);
  EXPECT_GT(m.mem_available, 0u);
  EXPECT_LE(m.usable_bytes(), m.mem_available);
  EXPECT_LE(m.usable_bytes(), m.mem_total);
  // measure() reads /proc/meminfo again and other processes allocate and free
  // in between (ctest -j, a build), so the two readings agree only roughly:
  // the host's free memory is its usable memory, not something else (e.g. its
  // total).
  const DeviceMemory h = probe.measure(Device::host());
  EXPECT_EQ(h.total_bytes, m.total_bytes());
  const uint64_t again = probe.host().usable_bytes();
  EXPECT_GE(h.free_bytes + kGiB, std::min(m.usable_bytes(), again));
  EXPECT_LE(h.free_bytes, std::max(m.usable_bytes(), again) + kGiB);
  // A virtual device's memory is its cap, whatever the host has.
  const DeviceMemory v = probe.measure(Device{DeviceKind::kCpu, 0, 64 * kGiB});
  EXPECT_EQ(v.free_bytes, 64 * kGiB);
  EXPECT_EQ(v.total_bytes, 64 * kGiB);
  EXPECT_GE(probe.cuda_device_count(), 0);
  EXPECT_THROW(probe.measure(Device{DeviceKind::kCuda, 99, std::nullopt}), ConfigError);
}

TEST(MemoryProbe, FakeProbe) {
  FakeProbe p = FakeProbe::with_host(16 * kGiB);
  p.gpus = {{24 * kGiB, 23 * kGiB}, {12 * kGiB, 11 * kGiB}};
  EXPECT_EQ(p.measure(Device::host()).free_bytes, 16 * kGiB);
  EXPECT_EQ(p.cuda_device_count(), 2);
  EXPECT_EQ(p.measure(Device{DeviceKind::kCuda, 1, std::nullopt}).free_bytes, 11 * kGiB);
  // A cap on a GPU lowers what it offers.
  EXPECT_EQ(p.measure(Device{DeviceKind::kCuda, 0, 8 * kGiB}).free_bytes, 8 * kGiB);
  EXPECT_THROW(p.measure(Device{DeviceKind::kCuda, 2, std::nullopt}), ConfigError);
  p.host_info.cgroup_limit = 2 * kGiB;
  p.host_info.cgroup_usage = 1 * kGiB;
  EXPECT_EQ(p.measure(Device::host()).free_bytes, 1 * kGiB);
}

}  // namespace
}  // namespace pagellm
