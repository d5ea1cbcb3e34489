#include "planner/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include "planner/cost_model.h"
#include "planner/expert_plan.h"
#include "util/enum_names.h"
#include "util/sizes.h"

namespace pagellm {

const char* binding_limit_name(BindingLimit b) {
  static constexpr std::array<const char*, 6> kNames = {
      "max_seq_len_x_max_num_seqs", "kv_tokens", "device_memory", "host_memory", "kv_mem",
      "kv_fraction"};
  static_assert(names_cover(BindingLimit::kKvFraction, kNames));
  return enum_name(b, kNames);
}

int32_t Plan::host_layers() const {
  for (const auto& d : devices)
    if (d.device.is_host()) return d.n_layers();
  return 0;
}

const DevicePlan& Plan::device_of_layer(int32_t layer) const {
  for (const auto& d : devices)
    if (d.has_layers() && layer >= d.first_layer && layer <= d.last_layer) return d;
  throw Error(fmt::format("layer {} is not in the plan (0-{})", layer, n_layer - 1));
}

uint64_t Plan::kv_bytes() const {
  uint64_t b = 0;
  for (const auto& d : devices) b += d.kv_bytes;
  return b;
}

uint64_t Plan::state_bytes() const {
  uint64_t b = 0;
  for (const auto& d : devices) b += d.state_bytes;
  return b;
}

std::vector<KvPoolPlacement> Plan::kv_placements() const {
  std::vector<KvPoolPlacement> out;
  for (int32_t l = 0; l < n_layer;) {
    const DevicePlan& d = device_of_layer(l);
    out.push_back({d.name(), d.first_layer, d.last_layer + 1});
    l = d.last_layer + 1;
  }
  return out;
}

std::vector<KvPoolPlacement> Plan::node_placements(int32_t node) const {
  std::vector<KvPoolPlacement> out;
  for (const KvPoolPlacement& p : kv_placements())
    if (device_of_layer(p.layer_begin).node == node) out.push_back(p);
  return out;
}

std::vector<int32_t> Plan::kv_group_blocks() const {
  std::vector<int32_t> out;
  for (const KvGroupPlan& g : kv_groups) out.push_back(g.blocks);
  if (out.empty()) out.push_back(num_blocks);
  return out;
}

std::string Plan::device_map() const {
  DeviceMap map;
  for (int32_t l = 0; l < n_layer;) {
    const DevicePlan& d = device_of_layer(l);
    map.push_back({d.first_layer, d.last_layer, d.device});
    l = d.last_layer + 1;
  }
  for (int32_t l = 0; l < static_cast<int32_t>(experts_on_host.size()); ++l) {
    if (!experts_on_host[static_cast<size_t>(l)]) continue;
    int32_t m = l;
    while (m + 1 < static_cast<int32_t>(experts_on_host.size()) &&
           experts_on_host[static_cast<size_t>(m + 1)])
      ++m;
    map.push_back({l, m, Device::host(), /*experts=*/true});
    l = m;
  }
  return format_device_map(map);
}

int32_t Plan::expert_layers_on_host() const {
  return static_cast<int32_t>(std::count(experts_on_host.begin(), experts_on_host.end(), true));
}

namespace {

using namespace planner_detail;

int64_t ceil_div(int64_t a, int64_t b) {  // a >= 0, b > 0; no overflow
  return a / b + (a % b != 0);
}

// Appends `item` to `s`, after `sep` unless `s` is empty.
void append(std::string& s, const char* sep, const std::string& item) {
  if (!s.empty()) s += sep;
  s += item;
}

std::string layers_text(const LayerRange& r) {
  if (r.empty()) return "no layers";
  if (r.size() == 1) return fmt::format("layer {}", r.begin);
  return fmt::format("layers {}-{}", r.begin, r.end - 1);
}

class Planner {
 public:
  Planner(const PlanRequest& req, const ModelFootprint& fp, const CostModel& m)
      : req_(req), fp_(fp), m_(m) {
    bs_ = req.block_size;
    per_seq_ = ceil_div(req.max_seq_len, bs_);
    // Without a GPU the cache is in host RAM, shared with everything else: by
    // default room for kHostDefaultSeqs full-length sequences, not max_num_seqs.
    seqs_cap_ = req.max_num_seqs;
    bool gpu = false;
    for (const auto& d : m.devices()) gpu = gpu || d.device.kind == DeviceKind::kCuda;
    if (req.kv_mode == KvMode::kAuto && !gpu)
      seqs_cap_ = std::min(req.max_num_seqs, kHostDefaultSeqs);
    cap_ = per_seq_ > kMaxBlocks / seqs_cap_ ? kMaxBlocks : per_seq_ * seqs_cap_;
    min_tokens_ = req.min_kv_tokens > 0 ? req.min_kv_tokens : req.max_seq_len;
    min_blocks_ = std::max<int64_t>(1, ceil_div(min_tokens_, bs_));
    if (req.kv_mode == KvMode::kTokens) asked_ = ceil_div(req.kv_tokens, bs_);
  }

  Plan run() { return req_.device_map ? run_manual() : run_auto(); }

 private:
  // ---- automatic placement ----
  Plan run_auto() {
    if (req_.no_cpu_offload && m_.k() > 0) {
      // A layer (or the output projection, with the last layer) that no
      // accelerator's kernels run would have to go to the host.
      for (int l = 0; l < m_.n(); ++l) {
        bool any = false;
        for (int i = 0; i < m_.k() && !any; ++i) any = m_.runs(i, l, l + 1);
        if (any) continue;
        const auto bad = *m_.first_unrunnable(0, l, l + 1);
        throw ConfigError(
            fmt::format("--no-cpu-offload: {} has {} weights, which only the host's kernels run",
                        bad.first == m_.n() ? std::string("the output projection")
                                            : fmt::format("layer {}", bad.first),
                        dtype_name(bad.second)));
      }
    }
    if (req_.kv_mode == KvMode::kTokens) {
      const int64_t target = std::min(asked_, cap_);
      if (auto h = m_.min_host_layers(target))
        return finish(m_.packed_placement(target, *h), target);
      if (req_.no_cpu_offload) {
        // Shrink the cache instead of offloading, down to --min-kv-tokens.
        const int64_t most = largest(0);
        if (most >= std::min(min_blocks_, target)) return finish(balanced(0), most);
        refuse_floor(most, std::min(min_blocks_, target));
      }
      refuse_tokens(target);
    }
    const int64_t floor = std::min(min_blocks_, cap_);
    auto h = m_.min_host_layers(floor);
    if (!h) refuse_floor(largest_any(), floor);
    const auto r = balanced(*h);
    return finish(r, std::min(m_.max_blocks(r), cap_));
  }

  // The most blocks any allowed placement holds (-1: none fits).
  int64_t largest_any() const {
    return largest_fitting(m_.search_limit(),
                           [&](int64_t b) { return m_.min_host_layers(b).has_value(); });
  }
  // The most blocks with exactly h host layers.
  int64_t largest(int h) const {
    return largest_fitting(m_.search_limit(),
                           [&](int64_t b) { return m_.fits_with_host_layers(b, h); });
  }
  // The placement with h host layers that holds the most blocks: ranges are
  // balanced so that the tightest device is as loose as it can be.
  std::vector<LayerRange> balanced(int h) const { return m_.placement(largest(h), h); }

  // ---- manual map ----
  Plan run_manual() {
    std::vector<Device> devs;
    for (const auto& d : m_.devices()) devs.push_back(d.device);
    const auto r = resolve_device_map(*req_.device_map, m_.n(), devs);
    for (int i = 0; i < m_.k(); ++i) {
      const LayerRange& range = r[static_cast<size_t>(i)];
      if (const auto bad = m_.first_unrunnable(i, range.begin, range.end))
        throw ConfigError(fmt::format(
            "--device-map puts {} on {}, whose kernels do not run {} weights",
            bad->first == m_.n() ? std::string("the output projection (with the last layer)")
                                 : fmt::format("layer {}", bad->first),
            m_.dev(i).device.name(), dtype_name(bad->second)));
      if (const auto l = m_.detached_kv_layer(i, range.begin, range.end))
        throw ConfigError(fmt::format(
            "--device-map puts layer {} and layer {}, whose KV cache it reads, on different devices, "
            "but {} has memory of its own: it needs both or neither",
            *l, fp_.kv_source(*l), m_.dev(i).device.name()));
    }
    const LayerRange& host = r[static_cast<size_t>(m_.host())];
    if (req_.no_cpu_offload && !host.empty())
      throw ConfigError(fmt::format(
          "--device-map puts {} on host, but --no-cpu-offload forbids layers on the host",
          layers_text(host)));
    const int64_t most = m_.max_blocks(r);
    if (req_.kv_mode == KvMode::kTokens) {
      const int64_t target = std::min(asked_, cap_);
      if (most >= target) return finish(r, target);
      refuse_manual(r, most, target,
                    fmt::format("a KV cache of {} tokens", format_count(target * bs_)));
    }
    const int64_t floor = std::min(min_blocks_, cap_);
    if (most >= floor) return finish(r, std::min(most, cap_));
    refuse_manual(r, most, floor, floor_text(floor));
  }

  // ---- the plan ----
  Plan finish(const std::vector<LayerRange>& r, int64_t blocks) const {
    Plan p;
    p.n_layer = m_.n();
    p.block_size = bs_;
    p.num_blocks = static_cast<int32_t>(blocks);
    p.kv_tokens = blocks * bs_;
    p.max_seq_len = req_.max_seq_len;
    p.max_num_seqs = req_.max_num_seqs;
    p.max_concurrent_full_sequences = blocks / per_seq_;
    p.kv_mode = req_.kv_mode;
    p.manual_map = req_.device_map.has_value();
    p.kernel_note = kernel_note();
    p.kv_type = fp_.kv_type;
    p.n_kv_heads = fp_.n_kv_heads;
    p.head_dim = fp_.head_dim;
    p.kv_bytes_per_token = m_.full_token_bytes(0, m_.n());
    p.latent_kv = fp_.latent_kv;
    if (fp_.latent_kv)  // MLA layers are alike: as many GQA layers as latent ones
      p.gqa_kv_bytes_per_token =
          fp_.gqa_kv_bytes_per_token_layer * (p.kv_bytes_per_token / fp_.kv_bytes_per_token_layer);
    set_kv_sharing(p, fp_);
    p.kv_groups = plan_kv_groups(fp_, bs_, req_.max_num_seqs, blocks);
    p.recurrent_layers = fp_.n_recurrent();
    p.state_bytes_per_seq = fp_.state_bytes_per_seq();
    const StateCheckpointPlan cp = checkpoint_plan(fp_, req_);
    p.state_checkpoints = cp.entries;
    p.checkpoint_interval = cp.interval;
    uint64_t pool_used = 0;
    for (int i = 0; i <= m_.k(); ++i) {
      const LayerRange& x = r[static_cast<size_t>(i)];
      const PlanDevice& d = m_.dev(i);
      DevicePlan dp;
      dp.device = d.device;
      if (!x.empty()) {
        dp.first_layer = x.begin;
        dp.last_layer = x.end - 1;
        dp.holds_output = x.end == m_.n();
      }
      dp.weight_bytes = m_.weights(i, x.begin, x.end);
      dp.workspace_bytes = m_.workspace(i, x.begin, x.end);
      dp.kv_bytes = static_cast<uint64_t>(m_.kv(x.begin, x.end, blocks));
      dp.state_bytes = m_.state(x.begin, x.end);
      dp.host_tier_bytes = m_.host_tier(i);
      dp.disk_staging_bytes = m_.disk_staging(i);
      dp.headroom_bytes = d.headroom_bytes;
      dp.free_bytes = d.free_bytes;
      if (m_.shared(i)) pool_used += dp.used_bytes();
      dp.free_after_bytes = d.free_bytes > dp.used_bytes() ? d.free_bytes - dp.used_bytes() : 0;
      p.devices.push_back(dp);
    }
    DevicePlan& host = p.devices.back();
    host.free_after_bytes = host.free_bytes > pool_used ? host.free_bytes - pool_used : 0;
    explain_binding(p, r, blocks);
    return p;
  }

  void explain_binding(Plan& p, const std::vector<LayerRange>& r, int64_t blocks) const {
    if (req_.kv_mode == KvMode::kTokens && blocks == asked_) {
      p.binding_limit = BindingLimit::kKvTokens;
      p.binding_detail = fmt::format("--kv-tokens {} as asked", format_count(req_.kv_tokens));
      return;
    }
    const auto bounds = m_.bounds(r);
    const Bound* tight = nullptr;
    for (const auto& b : bounds)
      if (!tight || b.max_blocks < tight->max_blocks) tight = &b;
    if (blocks == cap_ &&
        (!tight || tight->max_blocks > blocks || req_.kv_mode == KvMode::kTokens)) {
      p.binding_limit = BindingLimit::kSeqCap;
      p.binding_detail =
          seqs_cap_ < req_.max_num_seqs
              ? fmt::format("max_seq_len x {} = {} x {} tokens: the host's default cache, room for "
                            "{} full-length sequences (-c or --kv-mem for more)",
                            kHostDefaultSeqs, format_count(req_.max_seq_len), seqs_cap_, seqs_cap_)
              : fmt::format(
                    "max_seq_len x max_num_seqs = {} x {} tokens; more cache would not be used",
                    format_count(req_.max_seq_len), req_.max_num_seqs);
      return;
    }
    p.binding_limit = tight->kind;
    p.binding_device = m_.dev(tight->device).device.name();
    p.binding_detail = describe(*tight);
    if (req_.kv_mode == KvMode::kTokens && req_.no_cpu_offload)
      p.binding_detail +=
          fmt::format("; --no-cpu-offload: {} tokens asked", format_count(req_.kv_tokens));
  }

  std::string pool_members() const {
    std::string s;
    for (const auto& d : m_.devices())
      if (d.device.shares_host_memory()) append(s, ", ", d.device.name());
    return s;
  }

  std::string budget_text(int i, bool shared) const {
    const PlanDevice& d = m_.dev(i);
    std::string s = fmt::format("{} free - {} headroom", format_size(d.free_bytes),
                                format_size(d.headroom_bytes));
    if (shared && m_.k() > 0 && pool_members() != "host") s += ", shared by " + pool_members();
    return s;
  }

  std::string describe(const Bound& b) const {
    const std::string name = m_.dev(b.device).device.name();
    switch (b.kind) {
      case BindingLimit::kKvMem:
        return fmt::format("--kv-mem {} on {}", format_size(req_.kv_mem_bytes), name);
      case BindingLimit::kKvFraction:
        return fmt::format("--kv-fraction {} of {}: {}", req_.kv_fraction,
                           b.shared ? "host RAM" : "memory of " + name,
                           budget_text(b.device, b.shared));
      case BindingLimit::kHostMemory:
        return fmt::format("host RAM (swap guard): {}", budget_text(b.device, true));
      default:
        return fmt::format("memory of {}: {}", name, budget_text(b.device, false));
    }
  }

  // "free 1.30 GiB on cpu:1 and 200.00 MiB of host RAM (shared by ...)".
  std::string remedy(const std::vector<Deficit>& ds) const {
    std::vector<std::string> frees, others;
    for (const auto& d : ds) {
      const std::string name = m_.dev(d.device).device.name();
      const uint64_t more = d.need - d.have;
      if (d.kind == BindingLimit::kKvMem)
        others.push_back(fmt::format("raise --kv-mem to {} ({})", format_size(d.need), name));
      else if (d.shared)
        frees.push_back(
            fmt::format("{} of host RAM{}", format_size(more),
                        pool_members() != "host" ? " (shared by " + pool_members() + ")" : ""));
      else
        frees.push_back(fmt::format("{} on {}", format_size(more), name));
    }
    auto join = [](const std::vector<std::string>& parts) {
      std::string s;
      for (size_t i = 0; i < parts.size(); ++i)
        append(s, i + 1 == parts.size() ? " and " : ", ", parts[i]);
      return s;
    };
    std::string s = frees.empty() ? "" : "free " + join(frees);
    if (!others.empty()) append(s, " and ", join(others));
    return s;
  }

  std::string placement_text(const std::vector<LayerRange>& r) const {
    std::string s;
    for (int i = 0; i <= m_.k(); ++i) {
      const LayerRange& x = r[static_cast<size_t>(i)];
      if (x.empty()) continue;
      append(s, ", ", layers_text(x) + " on " + m_.dev(i).device.name());
    }
    return s;
  }

  std::string offload_suffix() const {
    return req_.no_cpu_offload ? " without CPU offload (--no-cpu-offload)" : "";
  }

  std::string floor_text(int64_t floor) const {
    if (req_.min_kv_tokens > 0) return fmt::format("--min-kv-tokens {}", format_count(floor * bs_));
    return fmt::format("one sequence of --max-seq-len {} ({} tokens)",
                       format_count(req_.max_seq_len), format_count(floor * bs_));
  }

  // Which of the model's weight types each accelerator's kernels lack (layers
  // with them stay off it): "cuda:0 does not run q3_k, q5_0"; empty if none.
  std::string kernel_note() const {
    std::string out;
    for (int i = 0; i < m_.k(); ++i) {
      std::vector<DType> lacks;
      auto note = [&](DType t) {
        if (!m_.dev(i).runs_weight_type(t) &&
            std::find(lacks.begin(), lacks.end(), t) == lacks.end())
          lacks.push_back(t);
      };
      for (const auto& types : fp_.layer_types)
        for (DType t : types) note(t);
      note(fp_.output_type);
      if (lacks.empty()) continue;
      std::string names;
      for (DType t : lacks) append(names, ", ", dtype_name(t));
      append(out, "; ", fmt::format("{} does not run {}", m_.dev(i).device.name(), names));
    }
    return out;
  }
  // The note as the end of a refusal: why layers a device has room for stay
  // off it.
  std::string kernel_hint() const {
    const std::string note = kernel_note();
    return note.empty() ? ""
                        : fmt::format(" (weight types: {}: layers with them stay off it)", note);
  }

  // Models with recurrent layers: what their state takes wherever the layers
  // go (it scales with --max-num-seqs, not with the cache asked for).
  std::string state_hint() const {
    if (m_.state(0, m_.n()) == 0) return "";
    return fmt::format(
        "; the recurrent state of {} layer{} takes {} ({} per sequence x --max-num-seqs {}), "
        "on the devices that run them: fewer --max-num-seqs leave more room",
        fp_.n_recurrent(), fp_.n_recurrent() == 1 ? "" : "s", format_size(m_.state(0, m_.n())),
        format_size(fp_.state_bytes_per_seq()), req_.max_num_seqs);
  }

  // With --no-cpu-offload: how much would fit if layers could go to the host.
  std::string offload_hint() const {
    if (!req_.no_cpu_offload) return "";
    PlanRequest relaxed = req_;
    relaxed.no_cpu_offload = false;
    relaxed.device_map.reset();
    CostModel m(relaxed, fp_, m_.devices());
    const int64_t most = largest_fitting(
        m.search_limit(), [&](int64_t b) { return m.min_host_layers(b).has_value(); });
    if (most <= 0) return "";
    return fmt::format("; with CPU offload, {} tokens fit",
                       format_count(std::min(most, cap_) * bs_));
  }

  // Nothing fits, not even the weights.
  [[noreturn]] void refuse_weights(const std::string& what) const {
    std::string budgets;
    for (const auto& d : m_.devices())
      append(budgets, ", ", fmt::format("{} {}", d.device.name(), format_size(d.budget_bytes())));
    std::string msg = fmt::format(
        "{} does not fit{}: the model does not fit even without a KV cache (weights {}, "
        "workspace {} per device with layers; budgets after headroom: {})",
        what, offload_suffix(), format_size(fp_.total_weight_bytes()),
        format_size(fp_.layer_workspace_bytes), budgets);
    if (m_.k() == 0) {  // one possible placement: say exactly what is missing
      std::vector<LayerRange> r(1, LayerRange{0, m_.n()});
      msg += "; " + remedy(m_.deficits(r, 0));
    }
    throw PlanError(msg + offload_hint() + state_hint() + kernel_hint(), -1);
  }

  // --kv-tokens N that does not fit.
  [[noreturn]] void refuse_tokens(int64_t target) const {
    const std::string what = fmt::format("a KV cache of {} tokens ({} blocks of {})",
                                         format_count(target * bs_), format_count(target), bs_);
    const int64_t most = largest_any();
    if (most < 0) refuse_weights(what);
    const auto r = m_.placement(most, *m_.min_host_layers(most));
    throw PlanError(fmt::format("{} does not fit{}; largest cache that fits: {} tokens; or {} "
                                "(with {}){}",
                                what, offload_suffix(), format_count(most * bs_),
                                remedy(m_.deficits(r, target)), placement_text(r), offload_hint()) +
                        state_hint() + kernel_hint(),
                    most * bs_);
  }

  // The largest cache is below the floor (--min-kv-tokens or one sequence).
  [[noreturn]] void refuse_floor(int64_t most, int64_t floor) const {
    if (most < 0) refuse_weights(fmt::format("a KV cache of {}", floor_text(floor)));
    const auto r = m_.placement(most, *m_.min_host_layers(most));
    throw PlanError(
        fmt::format("largest cache that fits{}: {} tokens, less than {}; lower --max-seq-len or "
                    "--min-kv-tokens, or {} (with {}){}",
                    offload_suffix(), format_count(most * bs_), floor_text(floor),
                    remedy(m_.deficits(r, floor)), placement_text(r), offload_hint()) +
            state_hint() + kernel_hint(),
        most * bs_);
  }

  [[noreturn]] void refuse_manual(const std::vector<LayerRange>& r, int64_t most, int64_t target,
                                  const std::string& what) const {
    if (most < 0)
      throw PlanError(fmt::format("the --device-map placement ({}) does not fit even without a KV "
                                  "cache; {}{}",
                                  placement_text(r), remedy(m_.deficits(r, 0)), state_hint()),
                      -1);
    throw PlanError(fmt::format("the --device-map placement ({}) does not fit {}; largest cache "
                                "that fits with this map: {} tokens; or {}{}",
                                placement_text(r), what, format_count(std::min(most, cap_) * bs_),
                                remedy(m_.deficits(r, target)), state_hint()),
                    std::min(most, cap_) * bs_);
  }

  const PlanRequest& req_;
  const ModelFootprint& fp_;
  const CostModel& m_;
  int32_t seqs_cap_ = 1;
  int64_t bs_ = 16, per_seq_ = 1, cap_ = 0, min_tokens_ = 0, min_blocks_ = 1, asked_ = 0;
};

void validate(const PlanRequest& req, const ModelFootprint& fp,
              const std::vector<PlanDevice>& devices) {
  if (fp.n_layer <= 0 || fp.layer_weight_bytes.size() != static_cast<size_t>(fp.n_layer))
    throw ConfigError("planner: the model footprint has no layers");
  if (fp.kv_bytes_per_token_layer == 0) throw ConfigError("planner: KV bytes per token are zero");
  if (devices.empty() || !devices.back().device.is_host())
    throw ConfigError("planner: the device list must end with the host");
  for (size_t i = 0; i + 1 < devices.size(); ++i)
    if (devices[i].device.is_host()) throw ConfigError("planner: the host is listed twice");
  if (req.block_size <= 0 || req.block_size > 4096)
    throw ConfigError(fmt::format("--block-size must be in 1..4096 (got {})", req.block_size));
  if (req.max_seq_len <= 0)
    throw ConfigError(fmt::format("--max-seq-len must be positive (got {})", req.max_seq_len));
  if (req.max_num_seqs <= 0)
    throw ConfigError(fmt::format("--max-num-seqs must be positive (got {})", req.max_num_seqs));
  if (req.min_kv_tokens < 0)
    throw ConfigError(
        fmt::format("--min-kv-tokens must not be negative (got {})", req.min_kv_tokens));
  switch (req.kv_mode) {
    case KvMode::kTokens:
      if (req.kv_tokens <= 0)
        throw ConfigError(fmt::format("--kv-tokens must be positive (got {})", req.kv_tokens));
      break;
    case KvMode::kMemory:
      if (req.kv_mem_bytes == 0) throw ConfigError("--kv-mem must be positive");
      break;
    case KvMode::kFraction:
      if (!(req.kv_fraction > 0 && req.kv_fraction <= 1))
        throw ConfigError(fmt::format("--kv-fraction must be in (0, 1] (got {})", req.kv_fraction));
      break;
    case KvMode::kAuto:
      break;
  }
  if (req.no_cpu_offload && devices.size() == 1)
    throw ConfigError(
        "--no-cpu-offload needs a device besides the host (--device cuda:N or --device "
        "cpu:N=SIZE)");
}

// Devices that are interchangeable in a pipeline order (same kind, memory
// and kernels) give the same plans wherever they stand.
bool same_for_planning(const PlanDevice& a, const PlanDevice& b) {
  return a.device.kind == b.device.kind && a.free_bytes == b.free_bytes &&
         a.headroom_bytes == b.headroom_bytes &&
         a.missing_weight_kernels == b.missing_weight_kernels;
}

// Up to this many distinct orders of the accelerators, the search tries them
// all (6 distinct devices: 720).
constexpr double kMaxOrders = 720;

// Pipeline orders of the accelerators (the host stays last), the user's own
// order first. Every distinct order when there are at most kMaxOrders; else
// the user's order, the most-free-first order, and that order with each
// device moved to the end (the end carries the output head).
std::vector<std::vector<PlanDevice>> candidate_orders(const std::vector<PlanDevice>& devices) {
  const size_t k = devices.size() - 1;
  // Class of each accelerator: the index of the first device interchangeable with it.
  std::vector<size_t> cls(k);
  for (size_t i = 0; i < k; ++i) {
    cls[i] = i;
    for (size_t j = 0; j < i; ++j)
      if (same_for_planning(devices[i], devices[j])) {
        cls[i] = cls[j];
        break;
      }
  }
  // Distinct orders: k! / the product of each class's count!.
  double distinct = 1;
  std::vector<size_t> seen(k, 0);
  for (size_t i = 0; i < k; ++i)
    distinct *= static_cast<double>(i + 1) / static_cast<double>(++seen[cls[i]]);
  auto arrange = [&](const std::vector<size_t>& idx) {
    std::vector<PlanDevice> out;
    for (size_t i : idx) out.push_back(devices[i]);
    out.push_back(devices.back());
    return out;
  };
  std::vector<std::vector<PlanDevice>> orders;
  if (distinct <= kMaxOrders) {
    // The class sequence is sorted in the user's order, so next_permutation
    // visits each distinct order once, the user's first.
    std::vector<size_t> seq = cls;
    do {
      std::vector<size_t> idx;
      std::vector<char> used(k, 0);
      for (size_t c : seq)
        for (size_t i = 0; i < k; ++i)
          if (!used[i] && cls[i] == c) {  // the user's earliest unused device of the class
            used[i] = 1;
            idx.push_back(i);
            break;
          }
      orders.push_back(arrange(idx));
    } while (std::next_permutation(seq.begin(), seq.end()));
    return orders;
  }
  std::vector<size_t> user(k);
  for (size_t i = 0; i < k; ++i) user[i] = i;
  orders.push_back(arrange(user));
  std::vector<size_t> by_free = user;
  std::stable_sort(by_free.begin(), by_free.end(), [&](size_t a, size_t b) {
    return devices[a].free_bytes > devices[b].free_bytes;
  });
  orders.push_back(arrange(by_free));
  for (size_t last = 0; last < k; ++last) {
    std::vector<size_t> idx;
    for (size_t i : by_free)
      if (i != by_free[last]) idx.push_back(i);
    idx.push_back(by_free[last]);
    orders.push_back(arrange(idx));
  }
  return orders;
}

// Whether plan `a` beats plan `b`: fewer host layers, then more blocks.
bool better(const Plan& a, const Plan& b) {
  if (a.host_layers() != b.host_layers()) return a.host_layers() < b.host_layers();
  return a.num_blocks > b.num_blocks;
}

}  // namespace

Plan make_plan(const PlanRequest& req, const ModelFootprint& fp,
               const std::vector<PlanDevice>& devices) {
  validate(req, fp, devices);
  if (fp.has_experts()) return make_expert_plan(req, fp, devices);
  if (req.device_map && !resolve_expert_map(*req.device_map, fp.n_layer).empty())
    throw ConfigError("--device-map places experts, but the model has no experts");
  Plan p = make_layer_plan(req, fp, devices);
  annotate_weights(p, fp, {});
  return p;
}

namespace planner_detail {

Plan make_layer_plan(const PlanRequest& req, const ModelFootprint& fp,
                     const std::vector<PlanDevice>& devices) {
  if (req.device_map) {  // the map pins the order
    CostModel m(req, fp, devices);
    return Planner(req, fp, m).run();
  }
  // The order is part of the optimisation: the device with the last layers
  // also holds the output head and its workspace, so which device ends the
  // pipeline changes how many blocks fit. Ties keep the earlier (user's) order.
  std::optional<Plan> best;
  std::optional<PlanError> refusal;
  for (auto& order : candidate_orders(devices)) {
    CostModel m(req, fp, std::move(order));
    try {
      Plan p = Planner(req, fp, m).run();
      if (!best || better(p, *best)) best = std::move(p);
    } catch (const PlanError& e) {
      if (!refusal || e.largest_kv_tokens() > refusal->largest_kv_tokens()) refusal = e;
    }
  }
  if (best) return *best;
  throw *refusal;
}

}  // namespace planner_detail

int64_t max_blocks_for_placement(const PlanRequest& req, const ModelFootprint& fp,
                                 const std::vector<PlanDevice>& devices,
                                 const std::vector<LayerRange>& ranges) {
  validate(req, fp, devices);
  if (ranges.size() != devices.size())
    throw ConfigError("max_blocks_for_placement: one range per device");
  CostModel m(req, fp, devices);
  for (int i = 0; i < m.k(); ++i)  // a placement the runner refuses holds nothing
    if (m.detached_kv_layer(i, ranges[static_cast<size_t>(i)].begin, ranges[static_cast<size_t>(i)].end))
      return -1;
  const int64_t b = m.max_blocks(ranges);
  return b == kNoBound ? kMaxBlocks : std::min<int64_t>(b, kMaxBlocks);
}

}  // namespace pagellm
