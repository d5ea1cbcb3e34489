// A device that holds model layers and KV cache: the host CPU, a CUDA GPU, or
// a virtual CPU device (host RAM with a memory cap, declared as
// `--device cpu:0=2GiB`) that the planner and the pipeline treat exactly as an
// accelerator. Virtual CPU devices and the host share the host's RAM.
//
// A GPU declared more than once (`--device cuda:0=40GiB --device cuda:0=20GiB`)
// is split into parts, one per declaration, so that one physical GPU can stand
// in for several GPUs of unequal memory: the k-th declaration (0-based) is part
// k, named "cuda:0" for part 0 and "cuda:0.1", "cuda:0.2", ... after. The parts
// share the GPU's memory (planner/plan_device.h says how).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace pagellm {

enum class DeviceKind { kCpu, kCuda };

// "cpu" or "cuda".
const char* device_kind_name(DeviceKind kind);

// True when the kernels of a device of this kind run weights of type t: the
// CPU every type, CUDA the types of backend/cuda/gemv.h (every GGUF weight type
// the CPU runs, not the Q8_1 / Q8_K activation formats; a CUDA build's test
// checks the two lists agree). The planner keeps other layers off such devices.
bool device_runs_weight_type(DeviceKind kind, DType t);

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int32_t index = -1;                  // N of cpu:N / cuda:N; -1 for the host
  std::optional<uint64_t> memory_cap;  // cpu:N=SIZE (required) or cuda:N=SIZE (optional)
  int32_t part = 0;                    // cuda only: the part of a split GPU (its K-th declaration)

  static Device host() { return Device{}; }

  bool is_host() const { return kind == DeviceKind::kCpu && index < 0; }
  bool is_virtual() const { return kind == DeviceKind::kCpu && index >= 0; }
  // Memory comes out of host RAM (the host itself and virtual CPU devices).
  bool shares_host_memory() const { return kind == DeviceKind::kCpu; }
  // The GPU (or the cpu:N) itself, whichever part this is: N of cuda:N.K.
  int32_t physical_index() const { return index; }
  // "host", "cpu:0", "cuda:1"; "cuda:1.2" for part 2 of a split GPU.
  std::string name() const;
  // Name of the kernel backend that runs this device's layers ("cpu", "cuda").
  const char* backend_name() const { return device_kind_name(kind); }

  bool operator==(const Device& o) const {
    return kind == o.kind && index == o.index && part == o.part;
  }
};

// Parses a device name: "host", "cpu:N", "cuda:N" or "cuda:N.K" (part K of a
// split GPU; "cuda:N.0" is cuda:N). Throws ConfigError.
Device parse_device_name(const std::string& name);

// Parses a --device value: "cpu:N=SIZE" (a virtual CPU device; the size is
// required), "cuda:N" or "cuda:N=SIZE" (use at most SIZE of that GPU).
// "host" cannot be declared: it is always there, and neither can a part
// ("cuda:N.K"): declaring cuda:N again makes the next part. Throws ConfigError.
Device parse_device(const std::string& spec);

// Parses every --device value. A cpu:N may be declared once. A cuda:N declared
// again becomes the next part of that GPU (part = how many times it was
// declared before); every declaration of a GPU declared more than once needs a
// size. Throws ConfigError.
std::vector<Device> parse_devices(const std::vector<std::string>& specs);

}  // namespace pagellm
