#include "planner/plan_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace pagellm {

uint64_t default_headroom(const Device& d, uint64_t free_bytes) {
  const uint64_t five_percent = free_bytes / 20;
  if (d.is_virtual()) return five_percent;
  return std::max<uint64_t>(five_percent, uint64_t{512} << 20);
}

namespace {

// Gives the parts of one GPU (`parts`: indices into `out`, in part order) their
// share of the GPU's free memory and of one headroom; see plan_device.h.
void share_gpu(std::vector<PlanDevice>& out, const std::vector<size_t>& parts, uint64_t gpu_free,
               std::optional<uint64_t> headroom) {
  uint64_t left = gpu_free, sum = 0;
  for (size_t i : parts) {
    const uint64_t cap = out[i].device.memory_cap.value_or(std::numeric_limits<uint64_t>::max());
    out[i].free_bytes = std::min(cap, left);
    left -= out[i].free_bytes;
    sum += out[i].free_bytes;
  }
  const uint64_t h = headroom ? *headroom : default_headroom(out[parts[0]].device, sum);
  for (size_t i : parts) {
    if (sum == 0) {
      out[i].headroom_bytes = i == parts[0] ? h : 0;
      continue;
    }
    // ceil(h * free / sum): the shares add up to at least h, and none is
    // larger than its part's free memory when h <= sum.
    const unsigned __int128 num = static_cast<unsigned __int128>(h) * out[i].free_bytes;
    out[i].headroom_bytes = static_cast<uint64_t>((num + sum - 1) / sum);
  }
}

}  // namespace

std::vector<PlanDevice> measure_devices(const std::vector<Device>& declared, MemoryProbe& probe,
                                        std::optional<uint64_t> headroom, bool all_gpus) {
  std::vector<Device> devices;
  for (const auto& d : declared) {
    if (d.is_host()) continue;
    for (const auto& o : devices)
      if (o == d) throw ConfigError(fmt::format("device {} is declared twice", d.name()));
    devices.push_back(d);
  }
  if (devices.empty() && all_gpus)
    for (int32_t i = 0; i < probe.cuda_device_count(); ++i)
      devices.push_back(Device{DeviceKind::kCuda, i, std::nullopt});
  devices.push_back(Device::host());
  std::vector<PlanDevice> out;
  for (const auto& d : devices) {
    PlanDevice p;
    p.device = d;
    for (DType t : all_dtypes())
      if (!device_runs_weight_type(d.kind, t)) p.missing_weight_kernels.push_back(t);
    if (d.kind != DeviceKind::kCuda) {
      p.free_bytes = probe.measure(d).free_bytes;
      p.headroom_bytes = headroom ? *headroom : default_headroom(d, p.free_bytes);
    }
    out.push_back(p);
  }
  // GPUs, each measured once: its parts (one unless it is split) share it.
  for (size_t i = 0; i < out.size(); ++i) {
    const Device& d = out[i].device;
    if (d.kind != DeviceKind::kCuda) continue;
    std::vector<size_t> parts;
    for (size_t j = 0; j < out.size(); ++j)
      if (out[j].device.kind == d.kind && out[j].device.index == d.index) parts.push_back(j);
    if (parts[0] != i) continue;  // done with the GPU's first declaration
    std::stable_sort(parts.begin(), parts.end(),
                     [&](size_t a, size_t b) { return out[a].device.part < out[b].device.part; });
    share_gpu(out, parts, probe.cuda(d.physical_index()).free_bytes, headroom);
  }
  return out;
}

}  // namespace pagellm
