// PAGELLM_MEMINFO: the host memory probe reads that file instead of
// /proc/meminfo, again at every check (the swap guard's and the planner's).
#include <gtest/gtest.h>

#include <cstdlib>

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
  explicit EnvScope(const std::string& value) { ::setenv("PAGELLM_MEMINFO", value.c_str(), 1); }
  ~EnvScope() { ::unsetenv("PAGELLM_MEMINFO"); }
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

}  // namespace
}  // namespace pagellm
