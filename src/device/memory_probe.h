// How much memory each device has free, measured now.
//
// Host RAM: MemAvailable from /proc/meminfo, lowered to the cgroup's room
// (cgroup v2 memory.max - memory.current, the tightest along the process's
// cgroup path; cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes as a
// fallback) when that is smaller. Swap never counts as memory.
// CUDA: cudaMemGetInfo per device (only when built with PAGELLM_CUDA).
// Virtual CPU devices: their declared cap (they share host RAM, which the
// planner's swap guard accounts for).
//
// The readers take file contents / paths as parameters so tests can feed fake
// files; FakeProbe stands in for the whole machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device/device.h"

namespace pagellm {

struct HostMemoryInfo {
  uint64_t mem_total = 0;
  uint64_t mem_available = 0;
  uint64_t swap_total = 0;
  uint64_t swap_free = 0;
  std::optional<uint64_t> cgroup_limit;  // the binding cgroup's limit, if any
  std::optional<uint64_t> cgroup_usage;  // that cgroup's current usage

  // Room left in the cgroup (limit - usage, 0 when over), if limited.
  std::optional<uint64_t> cgroup_room() const;
  // What can be used without swapping: MemAvailable, or the cgroup's room if
  // lower. Swap is never counted.
  uint64_t usable_bytes() const;
  // Physical memory this process may have: MemTotal, or the cgroup limit if lower.
  uint64_t total_bytes() const;
};

struct DeviceMemory {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

// Parses /proc/meminfo text (values in kB). Throws FormatError when MemTotal
// or MemAvailable is missing.
HostMemoryInfo parse_meminfo(std::string_view text);

// Parses a cgroup memory file holding one number, or "max" (v2) / a value of
// 2^62 or more (v1, "unlimited"), which give nullopt. Throws FormatError.
std::optional<uint64_t> parse_cgroup_limit(std::string_view text);

// The cgroup v2 path ("0::/a/b" -> "/a/b") and the v1 memory controller's path
// ("4:memory:/a/b") in /proc/self/cgroup text; empty when absent.
std::string cgroup_v2_path(std::string_view proc_self_cgroup);
std::string cgroup_v1_memory_path(std::string_view proc_self_cgroup);

// Where host memory is read: $PAGELLM_MEMINFO when set (a file in
// /proc/meminfo's format, read at every check: a test and diagnosis hook that
// simulates memory pressure), else /proc/meminfo.
std::string meminfo_path();

// A device's memory as a test simulates it: with $PAGELLM_DEVICE_MEMINFO=DIR,
// the file DIR/<device name> (DIR/cpu:1, DIR/cuda:0), in /proc/meminfo's
// format, gives that device's total (MemTotal) and free memory
// (MemAvailable), read at every check (a test and diagnosis hook, as
// PAGELLM_MEMINFO is for host RAM). nullopt when unset or when the device
// has no file; a file that does not parse throws FormatError.
std::optional<DeviceMemory> read_simulated_device_memory(const std::string& device);

struct ProcPaths {
  std::string meminfo = meminfo_path();
  std::string self_cgroup = "/proc/self/cgroup";
  std::string cgroup_root = "/sys/fs/cgroup";
};

// Reads /proc/meminfo and the process's cgroup limits. Looks for cgroup v2
// files at ROOT/PATH/memory.{max,current} and every ancestor up to ROOT, and
// for v1 at ROOT/memory/PATH/memory.{limit_in_bytes,usage_in_bytes} and its
// ancestors; the limit with the least room binds. Missing cgroup files are
// not an error; a missing meminfo is (SystemError).
HostMemoryInfo read_host_memory(const ProcPaths& paths = {});

class MemoryProbe {
 public:
  virtual ~MemoryProbe() = default;
  virtual HostMemoryInfo host() = 0;
  virtual int32_t cuda_device_count() = 0;
  // Throws ConfigError for an index that is not there.
  virtual DeviceMemory cuda(int32_t index) = 0;

  // A device's memory: the host's usable RAM; a virtual device's cap; a GPU's
  // free memory, lowered to its cap if it has one (each declaration alone: the
  // parts of a split GPU share its memory in planner/plan_device.h's
  // measure_devices). A device other than the host that a test simulates
  // (read_simulated_device_memory) reads its file instead.
  DeviceMemory measure(const Device& d);
};

// The real machine.
class SystemProbe final : public MemoryProbe {
 public:
  explicit SystemProbe(ProcPaths paths = {}) : paths_(std::move(paths)) {}
  HostMemoryInfo host() override { return read_host_memory(paths_); }
  int32_t cuda_device_count() override;
  DeviceMemory cuda(int32_t index) override;

 private:
  ProcPaths paths_;
};

// A machine described by its fields, for tests.
class FakeProbe final : public MemoryProbe {
 public:
  HostMemoryInfo host_info;
  std::vector<DeviceMemory> gpus;

  // A host with `available` bytes available (MemTotal = available, no swap).
  static FakeProbe with_host(uint64_t available);

  HostMemoryInfo host() override { return host_info; }
  int32_t cuda_device_count() override { return static_cast<int32_t>(gpus.size()); }
  DeviceMemory cuda(int32_t index) override;
};

}  // namespace pagellm
