// --device-map: a manual layer placement that overrides the planner's.
//
//   --device-map "0-11:cpu:0,12-23:cpu:1"
//   --device-map "0-9:cuda:0,10-27:cuda:1,28-31:host"
//
// Comma-separated entries FIRST-LAST:DEVICE (inclusive layer numbers) or
// LAYER:DEVICE; DEVICE is host, cpu:N, cuda:N or cuda:N.K (part K of a GPU
// declared K+1 times or more, e.g. "0-11:cuda:0,12-23:cuda:0.1"). Every layer
// must be mapped exactly once, and a device holds one contiguous range
// (entries for the same device that touch are merged). Devices must be
// declared with --device (host always exists).
// Mixture-of-experts models: "experts:FIRST-LAST:host" entries put those
// layers' experts on the host (the rest of each layer stays on its device),
// e.g. "0-23:cuda:0,experts:8-23:host".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device/device.h"

namespace pagellm {

struct DeviceMapEntry {
  int32_t first_layer = 0;  // inclusive
  int32_t last_layer = 0;   // inclusive
  Device device;
  bool experts = false;  // "experts:FIRST-LAST:DEVICE": the layers' expert stacks only
};

using DeviceMap = std::vector<DeviceMapEntry>;

// Parses the syntax only. Throws ConfigError.
DeviceMap parse_device_map(const std::string& text);

struct LayerRange {
  int32_t begin = 0;  // [begin, end)
  int32_t end = 0;
  bool empty() const { return end <= begin; }
  int32_t size() const { return end - begin; }
};

// Checks a map against the model and the devices; returns the range of each
// device in `devices` (empty for devices the map does not use). Throws
// ConfigError naming the unmapped or twice-mapped layers, an undeclared device,
// or a device with two separate ranges.
std::vector<LayerRange> resolve_device_map(const DeviceMap& map, int32_t n_layer,
                                           const std::vector<Device>& devices);

// Per layer, whether the map puts its experts on the host ("experts:"
// entries; empty when it has none). Throws ConfigError for an experts entry
// for a device other than the host, a layer outside the model or mapped twice.
std::vector<bool> resolve_expert_map(const DeviceMap& map, int32_t n_layer);

// "0-11:cpu:0,12-23:cpu:1" (the canonical form of a map or a placement).
std::string format_device_map(const DeviceMap& map);

}  // namespace pagellm
