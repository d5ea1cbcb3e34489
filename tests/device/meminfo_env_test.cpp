// PAGELLM_MEMINFO: the host memory probe reads that file instead of
// /proc/meminfo, again at every check (the swap guard's and the planner's);
// PAGELLM_DEVICE_MEMINFO: a directory whose file per device stands for that
// device's memory (cudaMemGetInfo, a virtual device's cap).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "device/memory_probe.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

std::string meminfo_text(uint64_t total_kb, uint64_t available_kb) {
  return "MemTotal:       " + std::to_string(total_kb) + " kB\nMemFree:         1000 kB\n" +
         "MemAvailable:   " + std::to_string(available_kb) + " kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n";
}

struct EnvScope {
  explicit EnvScope(const std::string& value, const char* name = "PAGELLM_MEMINFO") : name(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvScope() { ::unsetenv(name); }
  const char* name;
};

TEST(MemInfoEnv, ProbeReadsTheFileAtEveryCheck) {
  test::TempPath file(".meminfo");
  test::write_file(file.path, meminfo_text(4'000'000, 3'000'000));
  {
    EnvScope env(file.path);
    EXPECT_EQ(meminfo_path(), file.path);
    SystemProbe probe;
    EXPECT_EQ(probe.host().mem_available, 3'000'000ull * 1024);
    EXPECT_EQ(read_host_memory().mem_total, 4'000'000ull * 1024);
    // Memory pressure from outside: the next check sees it.
    test::write_file(file.path, meminfo_text(4'000'000, 100'000));
    EXPECT_EQ(probe.host().mem_available, 100'000ull * 1024);
    EXPECT_LE(read_host_memory().usable_bytes(), 100'000ull * 1024);
  }
  EXPECT_EQ(meminfo_path(), "/proc/meminfo");
}

TEST(MemInfoEnv, AMissingFileIsAnError) {
  EnvScope env("/nonexistent/pagellm-meminfo");
  EXPECT_THROW(read_host_memory(), SystemError);
}

TEST(MemInfoEnv, DeviceFilesStandForTheirDevicesAtEveryCheck) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pagellm-devmem-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Device cpu1 = parse_device("cpu:1=2GiB"), cpu2 = parse_device("cpu:2=3GiB");
  FakeProbe probe;
  {
    EnvScope env(dir.string(), "PAGELLM_DEVICE_MEMINFO");
    test::write_file((dir / "cpu:1").string(), meminfo_text(2'000'000, 1'500'000));
    EXPECT_EQ(probe.measure(cpu1).total_bytes, 2'000'000ull * 1024);
    EXPECT_EQ(probe.measure(cpu1).free_bytes, 1'500'000ull * 1024);
    test::write_file((dir / "cpu:1").string(), meminfo_text(2'000'000, 10'000));
    EXPECT_EQ(probe.measure(cpu1).free_bytes, 10'000ull * 1024);
    EXPECT_EQ(probe.measure(cpu2).free_bytes, uint64_t{3} << 30);  // no file: its cap
    EXPECT_FALSE(read_simulated_device_memory("cuda:0"));
    test::write_file((dir / "cpu:1").string(), "MemTotal: 1 kB\n");
    EXPECT_THROW(probe.measure(cpu1), FormatError);
  }
  EXPECT_FALSE(read_simulated_device_memory("cpu:1"));  // unset: not simulated
  EXPECT_EQ(probe.measure(cpu1).free_bytes, uint64_t{2} << 30);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagellm
