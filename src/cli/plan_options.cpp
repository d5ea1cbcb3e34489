#include "cli/plan_options.h"

#include <fmt/format.h>

#include "backend/backend_factory.h"
#include "cli/cli_checks.h"
#include "cli/llama_compat.h"
#include "planner/device_map.h"
#include "util/error.h"
#include "util/sizes.h"

namespace pagellm::cli {

void PlanOptions::add_to(CLI::App& sub) {
  sub.add_option("--device", devices,
                 "Device to use besides the host (repeatable): cuda:N, cuda:N=SIZE (at most SIZE "
                 "of it; declaring a GPU again with a size splits it into parts cuda:N, cuda:N.1, "
                 "... sharing its memory), or cpu:N=SIZE, a virtual CPU device with a memory cap "
                 "(default: every CUDA device)");
  sub.add_option(
      "--device-map", device_map,
      "Manual layer placement, e.g. \"0-11:cpu:0,12-23:cpu:1\" (FIRST-LAST:DEVICE, "
      "DEVICE = host, cpu:N, cuda:N or cuda:N.K; every layer once, one range per device)");
  auto* tokens =
      sub.add_option("-c,--kv-tokens,--ctx-size", kv_tokens, "KV cache for N tokens in total")
          ->check(above(0));
  auto* mem = sub.add_option("--kv-mem", kv_mem, "At most SIZE of KV cache on any one device");
  auto* frac = sub.add_option("--kv-fraction", kv_fraction,
                              "KV cache: fraction F of what is free after weights, per device")
                   ->check(in_range(0.0, 1.0));
  tokens->excludes(mem)->excludes(frac);
  mem->excludes(frac);
  sub.add_option("--kv-type", kv_type, "KV cache type: f16, f32 or q8_0")->capture_default_str();
  sub.add_option("--headroom", headroom,
                 "Memory kept free on every device (default: max(5% of free, 512 MiB); 5% of the "
                 "cap for virtual cpu:N devices)");
  sub.add_option("--max-seq-len", max_seq_len,
                 "Longest sequence (default: the model's trained context)")
      ->check(above(0));
  sub.add_option("--max-num-seqs,--parallel", max_num_seqs,
                 "Most sequences at once (llama.cpp: -np, --parallel)")
      ->check(above(0))
      ->capture_default_str();
  sub.add_option("--min-kv-tokens", min_kv_tokens,
                 "Smallest acceptable cache (default: --max-seq-len)")
      ->check(above(0));
  sub.add_option("--block-size", block_size, "Tokens per KV block: 8, 16 or 32")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return v == "8" || v == "16" || v == "32" ? "" : "must be 8, 16 or 32, got '" + v + "'";
          },
          "8, 16 or 32"))
      ->capture_default_str();
  sub.add_option("-b,--max-batched-tokens,--batch-size", max_batched_tokens,
                 "Most tokens in one step (sizes the activation workspace; llama.cpp's -b)")
      ->check(above(0))
      ->capture_default_str();
  sub.add_option("--max-prefill-while-decoding", max_prefill_while_decoding,
                 "Most prompt tokens in a step while sequences are decoding, so that a long "
                 "prompt does not stall them (0: only --max-batched-tokens)")
      ->check(at_least(0))
      ->capture_default_str();
  sub.add_flag("--no-cpu-offload", no_cpu_offload,
               "Never put layers on the host CPU; shrink the cache instead (down to "
               "--min-kv-tokens)");
  add_llama_plan_flags(sub, *this);
}

PlanRequest PlanOptions::request(const ModelHParams& hp) const {
  PlanRequest r;
  if (kv_tokens > 0) {
    r.kv_mode = KvMode::kTokens;
    r.kv_tokens = kv_tokens;
  } else if (!kv_mem.empty()) {
    r.kv_mode = KvMode::kMemory;
    r.kv_mem_bytes = parse_size(kv_mem);
  } else if (kv_fraction > 0) {
    r.kv_mode = KvMode::kFraction;
    r.kv_fraction = kv_fraction;
  }
  r.block_size = block_size;
  // -c is the cache size everywhere; a sequence may use all of it, up to the
  // trained context.
  r.max_seq_len = max_seq_len > 0   ? max_seq_len
                  : kv_tokens > 0 ? std::min<int64_t>(hp.n_ctx_train, kv_tokens)
                                  : hp.n_ctx_train;
  r.max_num_seqs = max_num_seqs;
  r.min_kv_tokens = min_kv_tokens;
  r.no_cpu_offload = no_cpu_offload;
  // The engine builds no tier for such models: nothing to charge.
  r.host_tier_bytes = hp.no_prefix_tier_reason() ? 0 : host_tier_bytes;
  r.disk_staging_bytes = hp.no_prefix_tier_reason() ? 0 : disk_staging_bytes;
  r.prefix_caching = true;  // the engine's default: a hybrid's checkpoints are charged
  if (!device_map.empty()) r.device_map = parse_device_map(device_map);
  return r;
}

FootprintOptions PlanOptions::footprint_options() const {
  FootprintOptions o;
  o.kv_type = parse_dtype(kv_type);
  o.max_batched_tokens = max_batched_tokens;
  o.max_num_seqs = max_num_seqs;
  o.draft_rows = draft_rows;
  o.repack = repack;
  return o;
}

std::vector<PlanDevice> PlanOptions::measure_devices(MemoryProbe& probe) const {
  std::optional<uint64_t> room;
  if (!headroom.empty()) room = parse_size(headroom);
  const std::vector<Device> declared = parse_devices(devices);
  if (no_gpu_layers)
    for (const Device& d : declared)
      if (d.kind == DeviceKind::kCuda)
        throw ConfigError(fmt::format(
            "-ngl 0 keeps every layer off the GPUs, but --device {} declares one", d.name()));
  // Without the CUDA backend, layers cannot run on a GPU: engine commands
  // refuse one (`pagellm plan` still shows plans for them).
  if (for_execution && !cuda_backend_built())
    for (const Device& d : declared)
      if (d.kind == DeviceKind::kCuda)
        throw ConfigError(fmt::format(
            "device {}: this pagellm was built without CUDA (configure with -DPAGELLM_CUDA=ON); "
            "`pagellm plan --device {}` shows a plan for it",
            d.name(), d.name()));
  const bool all_gpus = (!for_execution || cuda_backend_built()) && !no_gpu_layers;
  return pagellm::measure_devices(declared, probe, room, all_gpus);
}

Plan PlanOptions::make_plan(const GgufFile& f, const ModelHParams& hp, MemoryProbe& probe) const {
  const PlanRequest req = request(hp);
  const ModelFootprint fp = model_footprint(f, hp, footprint_options());
  return pagellm::make_plan(req, fp, measure_devices(probe));
}

}  // namespace pagellm::cli
