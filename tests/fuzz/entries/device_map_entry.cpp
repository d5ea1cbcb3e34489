// --device-map text (with MoE "experts:" entries) through the parser, the
// resolvers and the planner, on a synthetic 8-layer model with experts over a
// virtual device and the host. What the planner accepts must stay within
// every budget and place every layer once.
#include <string>

#include "entries/fuzz_entries.h"
#include "planner/device_map.h"
#include "planner/planner.h"
#include "util/error.h"

namespace pagellm::fuzz {

int device_map(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  ModelFootprint fp;
  fp.arch = "llama";
  fp.n_layer = 8;
  fp.n_ctx_train = 1024;
  fp.n_kv_heads = 2;
  fp.head_dim = 64;
  fp.layer_weight_bytes.assign(8, 40 * kMiB);
  fp.layer_expert_bytes.assign(8, 30 * kMiB);
  fp.expert_read_fraction = 0.25;
  fp.host_weight_bytes = 8 * kMiB;
  fp.output_weight_bytes = fp.output_weight_bytes_on_host = 8 * kMiB;
  fp.kv_bytes_per_token_layer = 512;
  fp.max_batched_tokens = 64;
  fp.max_num_seqs = 4;
  fp.layer_workspace_bytes = 2 * kMiB;
  fp.host_expert_workspace_bytes = 1 * kMiB;
  const std::vector<PlanDevice> devices = {
      {Device{DeviceKind::kCpu, 0, 160 * kMiB}, 160 * kMiB, 0},
      {Device{DeviceKind::kCpu, 1, 400 * kMiB}, 400 * kMiB, 0},
      {Device::host(), 2048 * kMiB, 64 * kMiB}};
  try {
    const DeviceMap map = parse_device_map(text);
    if (format_device_map(map).empty()) violated("a parsed map formats as nothing");
    PlanRequest req;
    req.max_seq_len = 512;
    req.max_num_seqs = 4;
    req.device_map = map;
    const Plan p = make_plan(req, fp, devices);
    int32_t covered = 0;
    for (const auto& d : p.devices) {
      if (!d.device.is_host() && d.used_bytes() > d.free_bytes)
        violated("a device is planned over its memory");
      covered += d.n_layers();
    }
    if (covered != fp.n_layer) violated("the plan does not place every layer once");
    uint64_t experts = 0;
    for (const auto& d : p.devices) experts += d.expert_bytes;
    if (experts != 8 * 30 * kMiB) violated("expert bytes do not add up");
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace pagellm::fuzz
