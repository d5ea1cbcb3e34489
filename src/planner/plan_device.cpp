#include "planner/plan_device.h"

#include <algorithm>

namespace pagellm {

uint64_t default_headroom(const Device& d, uint64_t free_bytes) {
  const uint64_t five_percent = free_bytes / 20;
  if (d.is_virtual()) return five_percent;
  return std::max<uint64_t>(five_percent, uint64_t{512} << 20);
}

std::vector<PlanDevice> measure_devices(const std::vector<Device>& declared, MemoryProbe& probe,
                                        std::optional<uint64_t> headroom, bool all_gpus) {
  std::vector<Device> devices;
  for (const auto& d : declared)
    if (!d.is_host()) devices.push_back(d);
  if (devices.empty() && all_gpus)
    for (int32_t i = 0; i < probe.cuda_device_count(); ++i)
      devices.push_back(Device{DeviceKind::kCuda, i, std::nullopt});
  devices.push_back(Device::host());
  std::vector<PlanDevice> out;
  for (const auto& d : devices) {
    PlanDevice p;
    p.device = d;
    p.free_bytes = probe.measure(d).free_bytes;
    p.headroom_bytes = headroom ? *headroom : default_headroom(d, p.free_bytes);
    out.push_back(p);
  }
  return out;
}

}  // namespace pagellm
