#include "device/memory_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

#ifdef PAGELLM_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pagellm {

std::optional<uint64_t> HostMemoryInfo::cgroup_room() const {
  if (!cgroup_limit) return std::nullopt;
  const uint64_t used = cgroup_usage.value_or(0);
  return *cgroup_limit > used ? *cgroup_limit - used : 0;
}

uint64_t HostMemoryInfo::usable_bytes() const {
  auto room = cgroup_room();
  return room ? std::min(mem_available, *room) : mem_available;
}

uint64_t HostMemoryInfo::total_bytes() const {
  return cgroup_limit ? std::min(mem_total, *cgroup_limit) : mem_total;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Whole file, or nullopt when it cannot be opened.
std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Yields every line of `text`.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace

HostMemoryInfo parse_meminfo(std::string_view text) {
  HostMemoryInfo info;
  bool have_total = false, have_avail = false;
  for_each_line(text, [&](std::string_view line) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    std::string_view key = line.substr(0, colon);
    std::string_view rest = trim(line.substr(colon + 1));
    uint64_t mult = 1;
    if (rest.size() > 2 && rest.substr(rest.size() - 2) == "kB") {
      mult = 1024;
      rest = trim(rest.substr(0, rest.size() - 2));
    }
    auto v = parse_u64(rest);
    if (!v) return;
    const uint64_t bytes = *v * mult;
    if (key == "MemTotal") {
      info.mem_total = bytes;
      have_total = true;
    } else if (key == "MemAvailable") {
      info.mem_available = bytes;
      have_avail = true;
    } else if (key == "SwapTotal") {
      info.swap_total = bytes;
    } else if (key == "SwapFree") {
      info.swap_free = bytes;
    }
  });
  if (!have_total || !have_avail)
    throw FormatError(fmt::format("meminfo: missing {} (need MemTotal and MemAvailable)",
                                  have_total ? "MemAvailable" : "MemTotal"));
  return info;
}

std::optional<uint64_t> parse_cgroup_limit(std::string_view text) {
  std::string_view s = trim(text);
  if (s == "max") return std::nullopt;
  auto v = parse_u64(s);
  if (!v) throw FormatError(fmt::format("cgroup: cannot parse memory value '{}'", s));
  // cgroup v1 reports "no limit" as a huge page-aligned number near 2^63.
  if (*v >= (uint64_t{1} << 62)) return std::nullopt;
  return v;
}

std::string cgroup_v2_path(std::string_view text) {
  std::string out;
  for_each_line(text, [&](std::string_view line) {
    if (line.substr(0, 3) == "0::") out = std::string(trim(line.substr(3)));
  });
  return out;
}

std::string cgroup_v1_memory_path(std::string_view text) {
  std::string out;
  for_each_line(text, [&](std::string_view line) {
    // "ID:controller[,controller...]:path"
    size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) return;
    size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return;
    std::string_view ctrls = line.substr(c1 + 1, c2 - c1 - 1);
    bool has_memory = false;
    size_t start = 0;
    while (start <= ctrls.size()) {
      size_t comma = ctrls.find(',', start);
      std::string_view c =
          ctrls.substr(start, comma == std::string_view::npos ? ctrls.npos : comma - start);
      if (c == "memory") has_memory = true;
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (has_memory) out = std::string(trim(line.substr(c2 + 1)));
  });
  return out;
}

namespace {

// Keeps the limit with the least room among the cgroup directories from
// `base/path` up to `base`.
void scan_cgroup_dirs(const std::filesystem::path& base, const std::string& path,
                      const char* limit_file, const char* usage_file, HostMemoryInfo& info) {
  // base, base/a, base/a/b, ... for path "/a/b".
  std::vector<std::filesystem::path> dirs{base};
  for (const auto& part : std::filesystem::path(path).relative_path())
    if (!part.empty() && part != "." && part != "..") dirs.push_back(dirs.back() / part);
  for (const auto& dir : dirs) {
    auto lim_text = slurp((dir / limit_file).string());
    if (!lim_text) continue;
    std::optional<uint64_t> limit = parse_cgroup_limit(*lim_text);
    if (!limit) continue;
    uint64_t usage = 0;
    if (auto u = slurp((dir / usage_file).string())) usage = parse_cgroup_limit(*u).value_or(0);
    const uint64_t room = *limit > usage ? *limit - usage : 0;
    auto current = info.cgroup_room();
    if (!current || room < *current) {
      info.cgroup_limit = limit;
      info.cgroup_usage = usage;
    }
  }
}

}  // namespace

std::string meminfo_path() {
  const char* env = std::getenv("PAGELLM_MEMINFO");
  return env && *env ? env : "/proc/meminfo";
}

HostMemoryInfo read_host_memory(const ProcPaths& paths) {
  auto meminfo = slurp(paths.meminfo);
  if (!meminfo) throw SystemError(errno_message("cannot read " + paths.meminfo, errno));
  HostMemoryInfo info = parse_meminfo(*meminfo);
  const std::string self = slurp(paths.self_cgroup).value_or("");
  const std::filesystem::path root = paths.cgroup_root;
  // cgroup v2 (unified hierarchy): also its root, which in a container is the
  // container's own cgroup.
  scan_cgroup_dirs(root, cgroup_v2_path(self), "memory.max", "memory.current", info);
  // cgroup v1 memory controller.
  const std::string v1 = cgroup_v1_memory_path(self);
  if (!v1.empty() || std::filesystem::exists(root / "memory"))
    scan_cgroup_dirs(root / "memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes", info);
  return info;
}

std::optional<DeviceMemory> read_simulated_device_memory(const std::string& device) {
  const char* dir = std::getenv("PAGELLM_DEVICE_MEMINFO");
  if (!dir || !*dir) return std::nullopt;
  const auto text = slurp((std::filesystem::path(dir) / device).string());
  if (!text) return std::nullopt;
  const HostMemoryInfo info = parse_meminfo(*text);
  return DeviceMemory{info.mem_total, info.mem_available};
}

DeviceMemory MemoryProbe::measure(const Device& d) {
  DeviceMemory m;
  if (!d.is_host())
    if (auto simulated = read_simulated_device_memory(d.name())) return *simulated;
  if (d.is_host()) {
    const HostMemoryInfo h = host();
    m.total_bytes = h.total_bytes();
    m.free_bytes = h.usable_bytes();
  } else if (d.is_virtual()) {
    m.total_bytes = m.free_bytes = d.memory_cap.value_or(0);
  } else {
    m = cuda(d.index);
    if (d.memory_cap) {
      m.total_bytes = std::min(m.total_bytes, *d.memory_cap);
      m.free_bytes = std::min(m.free_bytes, *d.memory_cap);
    }
  }
  return m;
}

#ifdef PAGELLM_CUDA

int32_t SystemProbe::cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

DeviceMemory SystemProbe::cuda(int32_t index) {
  const int32_t n = cuda_device_count();
  if (index < 0 || index >= n)
    throw ConfigError(fmt::format("device cuda:{} is not there ({} CUDA device{} found)", index, n,
                                  n == 1 ? "" : "s"));
  int prev = 0;
  cudaGetDevice(&prev);
  size_t free_b = 0, total_b = 0;
  cudaError_t err = cudaSetDevice(index);
  if (err == cudaSuccess) err = cudaMemGetInfo(&free_b, &total_b);
  cudaSetDevice(prev);
  if (err != cudaSuccess)
    throw SystemError(
        fmt::format("cannot measure memory of cuda:{}: {}", index, cudaGetErrorString(err)));
  return {total_b, free_b};
}

#else

int32_t SystemProbe::cuda_device_count() {
  return 0;
}

DeviceMemory SystemProbe::cuda(int32_t index) {
  throw ConfigError(
      fmt::format("device cuda:{} is not there (pagellm was built without CUDA)", index));
}

#endif

FakeProbe FakeProbe::with_host(uint64_t available) {
  FakeProbe p;
  p.host_info.mem_total = available;
  p.host_info.mem_available = available;
  return p;
}

DeviceMemory FakeProbe::cuda(int32_t index) {
  if (index < 0 || index >= static_cast<int32_t>(gpus.size()))
    throw ConfigError(
        fmt::format("device cuda:{} is not there ({} CUDA devices found)", index, gpus.size()));
  return gpus[static_cast<size_t>(index)];
}

}  // namespace pagellm
