// A device as the planner sees it: its measured free memory and the headroom
// kept free on it. The host is always the last device.
//
// A split GPU (declared more than once: `--device cuda:0=40GiB --device
// cuda:0=20GiB`, parts cuda:0 and cuda:0.1) is measured once, and its parts
// share that memory as if they were separate GPUs that together fit on it:
//   * free: part k has min(its size, the GPU's free memory - the free of parts
//     0..k-1), so the parts' free memory adds up to at most the GPU's;
//   * headroom: one for the GPU (--headroom, or the default for a GPU whose
//     free memory is the parts' total), split between the parts in proportion
//     to their free memory (rounded up).
// The planner keeps each part's use within its free - headroom, so the parts
// together use at most the GPU's free memory minus (at least) one headroom.
// With the default headroom, parts of 40 and 20 GiB on an 80 GiB GPU get the
// 2 + 1 GiB that two GPUs capped at 40 and 20 GiB would keep (the 512 MiB
// floor applies to the GPU as a whole). A GPU declared once is the case of one
// part: free = min(size, free memory), headroom from that.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "device/device.h"
#include "device/memory_probe.h"

namespace pagellm {

struct PlanDevice {
  Device device;
  uint64_t free_bytes = 0;      // host: usable RAM now; virtual: its cap; GPU: free memory
                                // (a part of a split GPU: its share)
  uint64_t headroom_bytes = 0;  // kept free (a part of a split GPU: its share)
  // Weight types this device's kernels do not run (device_runs_weight_type,
  // filled by measure_devices): layers with them stay off it.
  std::vector<DType> missing_weight_kernels = {};

  bool runs_weight_type(DType t) const {
    return std::find(missing_weight_kernels.begin(), missing_weight_kernels.end(), t) ==
           missing_weight_kernels.end();
  }

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
// default on every device (on a split GPU, it is split between the parts).
// Throws ConfigError for a GPU that is not there or a device declared twice.
std::vector<PlanDevice> measure_devices(const std::vector<Device>& declared, MemoryProbe& probe,
                                        std::optional<uint64_t> headroom = std::nullopt,
                                        bool all_gpus = true);

}  // namespace pagellm
