#include "planner/device_map.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"
#include "util/strings.h"

namespace pagellm {

namespace {

int32_t parse_layer(const std::string& text, const std::string& entry) {
  const std::string s = trim(text);
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
    throw ConfigError(fmt::format(
        "invalid --device-map entry '{}': expected FIRST-LAST:DEVICE, e.g. 0-11:cpu:0", entry));
  return std::stoi(s);
}

std::string range_text(int32_t first, int32_t last) {
  return first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
}

}  // namespace

DeviceMap parse_device_map(const std::string& text) {
  DeviceMap map;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    const std::string entry =
        trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (entry.empty())
      throw ConfigError(fmt::format("invalid --device-map '{}': empty entry", text));
    DeviceMapEntry e;
    std::string body = entry;
    if (body.rfind("experts:", 0) == 0) {
      e.experts = true;
      body = trim(body.substr(8));
    }
    const size_t colon = body.find(':');
    if (colon == std::string::npos)
      throw ConfigError(fmt::format(
          "invalid --device-map entry '{}': expected FIRST-LAST:DEVICE, e.g. 0-11:cpu:0", entry));
    const std::string range = body.substr(0, colon);
    const size_t dash = range.find('-');
    e.first_layer = parse_layer(range.substr(0, dash), entry);
    e.last_layer =
        dash == std::string::npos ? e.first_layer : parse_layer(range.substr(dash + 1), entry);
    if (e.last_layer < e.first_layer)
      throw ConfigError(fmt::format("invalid --device-map entry '{}': {} is after {}", entry,
                                    e.first_layer, e.last_layer));
    try {
      e.device = parse_device_name(body.substr(colon + 1));
    } catch (const ConfigError& err) {
      throw ConfigError(fmt::format("invalid --device-map entry '{}': {}", entry, err.what()));
    }
    map.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return map;
}

std::vector<LayerRange> resolve_device_map(const DeviceMap& map, int32_t n_layer,
                                           const std::vector<Device>& devices) {
  std::vector<int> owner(static_cast<size_t>(n_layer), -1);
  for (const auto& e : map) {
    if (e.experts) continue;  // resolve_expert_map
    auto it = std::find(devices.begin(), devices.end(), e.device);
    if (it == devices.end() && e.device.part > 0) {
      const std::string gpu = Device{e.device.kind, e.device.index}.name();
      throw ConfigError(fmt::format(
          "--device-map uses {}, which is not declared (it is part {} of {}: declare --device "
          "{}=SIZE {} times)",
          e.device.name(), e.device.part, gpu, gpu, e.device.part + 1));
    }
    if (it == devices.end())
      throw ConfigError(fmt::format(
          "--device-map uses {}, which is not declared (add --device {}{})", e.device.name(),
          e.device.name(), e.device.kind == DeviceKind::kCpu ? "=SIZE" : ""));
    if (e.last_layer >= n_layer)
      throw ConfigError(
          fmt::format("--device-map maps layer {} to {}, but the model has {} "
                      "layers (0-{})",
                      e.last_layer, e.device.name(), n_layer, n_layer - 1));
    const int d = static_cast<int>(it - devices.begin());
    for (int32_t l = e.first_layer; l <= e.last_layer; ++l) {
      int& o = owner[static_cast<size_t>(l)];
      if (o >= 0)
        throw ConfigError(fmt::format("--device-map maps layer {} twice ({} and {})", l,
                                      devices[static_cast<size_t>(o)].name(), e.device.name()));
      o = d;
    }
  }
  // Unmapped layers, as ranges.
  std::string missing;
  for (int32_t l = 0; l < n_layer;) {
    if (owner[static_cast<size_t>(l)] >= 0) {
      ++l;
      continue;
    }
    int32_t m = l;
    while (m + 1 < n_layer && owner[static_cast<size_t>(m + 1)] < 0) ++m;
    if (!missing.empty()) missing += ", ";
    missing += range_text(l, m);
    l = m + 1;
  }
  if (!missing.empty())
    throw ConfigError(fmt::format(
        "--device-map does not map layer{} {} (the model has {} layers; map every layer, "
        "using host for layers on the CPU)",
        missing.find_first_of(",-") == std::string::npos ? "" : "s", missing, n_layer));

  std::vector<LayerRange> ranges(devices.size());
  std::vector<bool> seen(devices.size(), false);
  for (int32_t l = 0; l < n_layer;) {
    const int d = owner[static_cast<size_t>(l)];
    int32_t m = l;
    while (m + 1 < n_layer && owner[static_cast<size_t>(m + 1)] == d) ++m;
    auto& r = ranges[static_cast<size_t>(d)];
    if (seen[static_cast<size_t>(d)])
      throw ConfigError(
          fmt::format("--device-map gives {} layers {} and {}: a device holds one contiguous range",
                      devices[static_cast<size_t>(d)].name(), range_text(r.begin, r.end - 1),
                      range_text(l, m)));
    seen[static_cast<size_t>(d)] = true;
    r = {l, m + 1};
    l = m + 1;
  }
  return ranges;
}

std::vector<bool> resolve_expert_map(const DeviceMap& map, int32_t n_layer) {
  std::vector<bool> on_host;
  for (const auto& e : map) {
    if (!e.experts) continue;
    if (!e.device.is_host())
      throw ConfigError(fmt::format(
          "--device-map puts the experts of layers {} on {}: experts can be placed on the host "
          "only (they run with their layer otherwise)",
          range_text(e.first_layer, e.last_layer), e.device.name()));
    if (e.last_layer >= n_layer)
      throw ConfigError(fmt::format(
          "--device-map puts the experts of layer {} on the host, but the model has {} layers "
          "(0-{})",
          e.last_layer, n_layer, n_layer - 1));
    on_host.resize(static_cast<size_t>(n_layer), false);
    for (int32_t l = e.first_layer; l <= e.last_layer; ++l) {
      if (on_host[static_cast<size_t>(l)])
        throw ConfigError(fmt::format("--device-map places the experts of layer {} twice", l));
      on_host[static_cast<size_t>(l)] = true;
    }
  }
  return on_host;
}

std::string format_device_map(const DeviceMap& map) {
  std::string s;
  for (const auto& e : map) {
    if (!s.empty()) s += ',';
    if (e.experts) s += "experts:";
    s += range_text(e.first_layer, e.last_layer);
    s += ':';
    s += e.device.name();
  }
  return s;
}

}  // namespace pagellm
