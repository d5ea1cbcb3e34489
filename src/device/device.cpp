#include "device/device.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"
#include "util/sizes.h"
#include "util/strings.h"

namespace pagellm {

const char* device_kind_name(DeviceKind kind) {
  return kind == DeviceKind::kCuda ? "cuda" : "cpu";
}

bool device_runs_weight_type(DeviceKind kind, DType t) {
  if (kind == DeviceKind::kCpu) return true;
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4:
      return true;
    default:
      return false;
  }
}

std::string Device::name() const {
  if (is_host()) return "host";
  if (part > 0) return fmt::format("{}:{}.{}", device_kind_name(kind), index, part);
  return fmt::format("{}:{}", device_kind_name(kind), index);
}

namespace {

bool is_number(const std::string& s, size_t max_digits) {
  return !s.empty() && s.size() <= max_digits &&
         s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

Device parse_device_name(const std::string& text) {
  const std::string name = trim(text);
  if (name == "host") return Device::host();
  const size_t colon = name.find(':');
  const std::string kind = colon == std::string::npos ? name : name.substr(0, colon);
  Device d;
  if (kind == "cpu")
    d.kind = DeviceKind::kCpu;
  else if (kind == "cuda")
    d.kind = DeviceKind::kCuda;
  else
    throw ConfigError(fmt::format("invalid device '{}': expected host, cpu:N or cuda:N", name));
  std::string idx = colon == std::string::npos ? "" : name.substr(colon + 1);
  const size_t dot = idx.find('.');
  if (d.kind == DeviceKind::kCuda && dot != std::string::npos) {
    const std::string part = idx.substr(dot + 1);
    idx.resize(dot);
    if (!is_number(idx, 4) || !is_number(part, 3))
      throw ConfigError(fmt::format(
          "invalid device '{}': expected cuda:N with N a device number, or cuda:N.K for part K "
          "of a split GPU",
          name));
    d.part = std::stoi(part);
  }
  if (!is_number(idx, 4))
    throw ConfigError(
        fmt::format("invalid device '{}': expected {}:N with N a device number", name, kind));
  d.index = std::stoi(idx);
  return d;
}

Device parse_device(const std::string& spec) {
  const size_t eq = spec.find('=');
  Device d = parse_device_name(spec.substr(0, eq));
  if (d.is_host())
    throw ConfigError(fmt::format(
        "invalid device '{}': the host is always used; declare cpu:N=SIZE for a virtual device",
        spec));
  if (d.part > 0) {
    const std::string gpu = Device{d.kind, d.index}.name();
    throw ConfigError(
        fmt::format("invalid device '{}': to split {} into parts, declare it once per part "
                    "(--device {}=SIZE each time); its second declaration is named {}.1",
                    spec, gpu, gpu, gpu));
  }
  if (eq != std::string::npos) {
    const uint64_t cap = parse_size(trim(spec.substr(eq + 1)));
    if (cap == 0) throw ConfigError(fmt::format("invalid device '{}': the size is zero", spec));
    d.memory_cap = cap;
  }
  if (d.is_virtual() && !d.memory_cap)
    throw ConfigError(
        fmt::format("invalid device '{}': a virtual CPU device needs a memory size, e.g. {}=2GiB",
                    spec, d.name()));
  return d;
}

std::vector<Device> parse_devices(const std::vector<std::string>& specs) {
  std::vector<Device> out;
  for (const auto& s : specs) {
    Device d = parse_device(s);
    for (const auto& o : out) {
      if (o.kind != d.kind || o.index != d.index) continue;
      if (d.kind != DeviceKind::kCuda)
        throw ConfigError(fmt::format("device {} is declared twice", d.name()));
      ++d.part;  // the next part of a split GPU
    }
    out.push_back(d);
  }
  // Every declaration of a split GPU has a size.
  for (const auto& d : out) {
    if (d.kind != DeviceKind::kCuda || d.memory_cap) continue;
    const Device gpu{d.kind, d.index};
    const auto n = std::count_if(out.begin(), out.end(), [&](const Device& o) {
      return o.kind == gpu.kind && o.index == gpu.index;
    });
    if (n > 1)
      throw ConfigError(fmt::format(
          "device {} is declared {} times: each declaration of a split GPU needs a size, e.g. "
          "{}=40GiB",
          gpu.name(), n, gpu.name()));
  }
  return out;
}

}  // namespace pagellm
