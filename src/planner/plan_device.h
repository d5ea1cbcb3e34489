// A device as the planner sees it: its measured free memory and the headroom
// kept free on it. The host is always the last device.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "device/device.h"
#include "device/memory_probe.h"

namespace pagellm {

struct PlanDevice {
  Device device;
  uint64_t free_bytes = 0;      // host: usable RAM now; virtual: its cap; GPU: free memory
  uint64_t headroom_bytes = 0;  // kept free

  // What the plan may use: free - headroom (0 when the headroom is larger).
  uint64_t budget_bytes() const {
    return free_bytes > headroom_bytes ? free_bytes - headroom_bytes : 0;
  }
};

// The default headroom: max(5% of free, 512 MiB) on the host and on GPUs. A
// virtual CPU device keeps 5% of its cap only: it is carved out of host RAM,
// whose own headroom already protects the machine.
uint64_t default_headroom(const Device& d, uint64_t free_bytes);

// Measures the declared devices (when none is declared and `all_gpus`, every
// CUDA device the probe sees) and appends the host. `headroom` replaces the
// default on every device. Throws ConfigError for a GPU that is not there.
std::vector<PlanDevice> measure_devices(const std::vector<Device>& declared, MemoryProbe& probe,
                                        std::optional<uint64_t> headroom = std::nullopt,
                                        bool all_gpus = true);

}  // namespace pagellm
