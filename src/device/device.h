// A device that holds model layers and KV cache: the host CPU, a CUDA GPU, or
// a virtual CPU device (host RAM with a memory cap, declared as
// `--device cpu:0=2GiB`) that the planner and the pipeline treat exactly as an
// accelerator. Virtual CPU devices and the host share the host's RAM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pagellm {

enum class DeviceKind { kCpu, kCuda };

// "cpu" or "cuda".
const char* device_kind_name(DeviceKind kind);

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int32_t index = -1;                  // N of cpu:N / cuda:N; -1 for the host
  std::optional<uint64_t> memory_cap;  // cpu:N=SIZE (required) or cuda:N=SIZE (optional)

  static Device host() { return Device{}; }

  bool is_host() const { return kind == DeviceKind::kCpu && index < 0; }
  bool is_virtual() const { return kind == DeviceKind::kCpu && index >= 0; }
  // Memory comes out of host RAM (the host itself and virtual CPU devices).
  bool shares_host_memory() const { return kind == DeviceKind::kCpu; }
  // "host", "cpu:0", "cuda:1".
  std::string name() const;
  // Name of the kernel backend that runs this device's layers ("cpu", "cuda").
  const char* backend_name() const { return device_kind_name(kind); }

  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
};

// Parses a device name: "host", "cpu:N" or "cuda:N". Throws ConfigError.
Device parse_device_name(const std::string& name);

// Parses a --device value: "cpu:N=SIZE" (a virtual CPU device; the size is
// required), "cuda:N" or "cuda:N=SIZE" (use at most SIZE of that GPU).
// "host" cannot be declared: it is always there. Throws ConfigError.
Device parse_device(const std::string& spec);

// Parses every --device value; a device may be declared once. Throws ConfigError.
std::vector<Device> parse_devices(const std::vector<std::string>& specs);

}  // namespace pagellm
