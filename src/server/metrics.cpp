#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

namespace pagellm {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t b = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                       bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[b];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cum);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
}

ServerMetrics::ServerMetrics()
    : ttft({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0}),
      inter_token({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
                   0.5, 0.75, 1.0, 2.5}),
      e2e({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0,
           300.0}) {}

void ServerMetrics::count_http(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_[{route, status}];
}

void ServerMetrics::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finishes_[reason];
}

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

// One metric that shows one field of a stats struct S; the tables below list
// each group's fields once instead of one metric() call apiece.
template <class S>
struct FieldMetric {
  const char* name;
  const char* type;  // "counter" or "gauge"
  const char* help;
  std::variant<uint64_t S::*, int64_t S::*> field;
};

template <class S, size_t N>
void metrics(std::string& out, const S& stats, const FieldMetric<S> (&table)[N]) {
  for (const FieldMetric<S>& m : table) {
    const double value =
        std::visit([&](auto field) { return static_cast<double>(stats.*field); }, m.field);
    metric(out, m.name, m.type, m.help, value);
  }
}

constexpr FieldMetric<EngineStats> kEngineCounters[] = {
    {"pagellm_preemptions_total", "counter",
     "Sequences preempted (their KV cache freed, recomputed later)", &EngineStats::preemptions},
    {"pagellm_prompt_tokens_total", "counter", "Prompt tokens of admitted requests",
     &EngineStats::prompt_tokens},
    {"pagellm_prompt_tokens_cached_total", "counter", "Prompt tokens served by the prefix cache",
     &EngineStats::cached_prompt_tokens},
    {"pagellm_generation_tokens_total", "counter", "Tokens generated",
     &EngineStats::generated_tokens},
    {"pagellm_spec_proposed_total", "counter", "Drafted tokens verified by speculative decoding",
     &EngineStats::spec_proposed},
    {"pagellm_spec_accepted_total", "counter",
     "Drafted tokens that became output (speculative decoding)", &EngineStats::spec_accepted},
    {"pagellm_engine_steps_total", "counter", "Engine steps (batched forward passes)",
     &EngineStats::steps},
    {"pagellm_tier_restores_overlapped_total", "counter",
     "Prefix-cache blocks restored from the host or disk tier by a worker beside a forward pass",
     &EngineStats::restores_overlapped},
};

constexpr FieldMetric<HostTierStats> kHostTier[] = {
    {"pagellm_host_tier_hits_total", "counter",
     "Prefix-cache blocks restored from the host tier (--cache-host)", &HostTierStats::hits},
    {"pagellm_host_tier_misses_total", "counter", "Host-tier lookups that found no block",
     &HostTierStats::misses},
    {"pagellm_host_tier_recomputed_total", "counter",
     "Blocks the host tier held but computing them again was cheaper", &HostTierStats::recomputed},
    {"pagellm_host_tier_stored_total", "counter",
     "Blocks evicted from the KV pool and copied into the host tier", &HostTierStats::stored},
    {"pagellm_host_tier_stored_ahead_total", "counter",
     "Of them, copied by a worker during a forward pass before the pool evicted them",
     &HostTierStats::stored_ahead},
    {"pagellm_host_tier_evicted_total", "counter",
     "Blocks dropped from the host tier to make room (to --cache-dir if given)",
     &HostTierStats::evicted},
    {"pagellm_host_tier_stored_bytes_total", "counter",
     "Bytes copied from the KV pool into the host tier", &HostTierStats::bytes_in},
    {"pagellm_host_tier_restored_bytes_total", "counter",
     "Bytes restored from the host tier into the KV pool", &HostTierStats::bytes_out},
    {"pagellm_host_tier_blocks", "gauge", "Blocks held by the host tier",
     &HostTierStats::held_blocks},
    {"pagellm_host_tier_bytes", "gauge", "Host-tier memory populated now",
     &HostTierStats::held_bytes},
    {"pagellm_host_tier_capacity_bytes", "gauge", "The host tier's size",
     &HostTierStats::capacity_bytes},
};

constexpr FieldMetric<DiskTierStats> kDiskTier[] = {
    {"pagellm_disk_tier_hits_total", "counter", "Prefix-cache blocks read back from --cache-dir",
     &DiskTierStats::hits},
    {"pagellm_disk_tier_misses_total", "counter",
     "Disk-tier lookups that found no usable block file", &DiskTierStats::misses},
    {"pagellm_disk_tier_skipped_total", "counter",
     "Block files refused by a check (damaged, truncated, another model or layout)",
     &DiskTierStats::skipped},
    {"pagellm_disk_tier_written_bytes_total", "counter", "Bytes of block files written",
     &DiskTierStats::bytes_written},
    {"pagellm_disk_tier_read_bytes_total", "counter", "Bytes of block files read",
     &DiskTierStats::bytes_read},
    {"pagellm_disk_tier_files_written_total", "counter", "Block files written",
     &DiskTierStats::files_written},
    {"pagellm_disk_tier_files_evicted_total", "counter",
     "Block files deleted to keep --cache-dir under --cache-disk", &DiskTierStats::files_evicted},
    {"pagellm_disk_tier_writes_dropped_total", "counter",
     "Blocks not written (the write queue was full, or the write failed)",
     &DiskTierStats::writes_dropped},
    {"pagellm_disk_tier_prefetched_total", "counter",
     "Of the disk-tier hits, blocks read ahead off the engine thread while queued",
     &DiskTierStats::prefetched},
    {"pagellm_disk_tier_prefetch_reads_total", "counter",
     "Block files read ahead by the reader thread", &DiskTierStats::prefetch_reads},
    {"pagellm_disk_tier_recomputed_total", "counter",
     "Blocks on disk (or being read) computed instead: cheaper than the read",
     &DiskTierStats::recomputed},
};

constexpr FieldMetric<ElasticPoolStats> kElasticPool[] = {
    {"pagellm_kv_pool_grows_total", "counter",
     "Chunks of the elastic KV pool populated after the first", &ElasticPoolStats::grows},
    {"pagellm_kv_pool_shrinks_total", "counter",
     "Chunks of the elastic KV pool given back to the OS under memory pressure",
     &ElasticPoolStats::shrinks},
    {"pagellm_kv_pool_grow_refusals_total", "counter",
     "Times the elastic KV pool did not grow because host memory was short",
     &ElasticPoolStats::refusals},
};

}  // namespace

std::string ServerMetrics::render(const MetricsSnapshot& snap) const {
  std::string out;
  const EngineStats& e = snap.engine;
  metric(out, "pagellm_ready", "gauge", "1 once the model is loaded and requests are served",
         snap.ready ? 1 : 0);
  metric(out, "pagellm_requests_running", "gauge", "Sequences in the running batch", e.running);
  metric(out, "pagellm_requests_waiting", "gauge", "Sequences waiting for admission", e.waiting);
  metric(out, "pagellm_requests_in_flight", "gauge",
         "Engine requests submitted and not finished (bounded by --max-queue)",
         snap.requests_in_flight);
  const double usage = e.blocks.total > 0 ? static_cast<double>(e.blocks.used) / e.blocks.total : 0;
  metric(out, "pagellm_kv_cache_usage_ratio", "gauge",
         "Fraction of KV cache blocks held by sequences", usage);
  metric(out, "pagellm_kv_blocks_used", "gauge", "KV cache blocks held by sequences",
         e.blocks.used);
  metric(out, "pagellm_kv_blocks_cached", "gauge",
         "Free KV cache blocks still holding reusable prefix-cache content", e.blocks.cached);
  metric(out, "pagellm_kv_blocks_total", "gauge", "KV cache blocks in all", e.blocks.total);
  metric(out, "pagellm_prefix_cache_queries_total", "counter",
         "Blocks looked up in the prefix cache", static_cast<double>(e.blocks.prefix_queries));
  metric(out, "pagellm_prefix_cache_hits_total", "counter", "Blocks found in the prefix cache",
         static_cast<double>(e.blocks.prefix_hits));
  metrics(out, e, kEngineCounters);
  if (e.host_tier) metrics(out, e.host, kHostTier);
  if (e.disk_tier) metrics(out, e.disk, kDiskTier);
  // The KV pools per device: what they hold now (an elastic pool's
  // populated chunks) and the plan's size.
  out +=
      "# HELP pagellm_kv_pool_bytes KV pool bytes held in memory now, by device\n"
      "# TYPE pagellm_kv_pool_bytes gauge\n";
  for (const auto& d : e.kv_pool)
    out += fmt::format("pagellm_kv_pool_bytes{{device=\"{}\"}} {}\n", d.device, d.resident);
  out +=
      "# HELP pagellm_kv_pool_planned_bytes KV pool bytes of the plan (what the pool may grow to), "
      "by device\n"
      "# TYPE pagellm_kv_pool_planned_bytes gauge\n";
  for (const auto& d : e.kv_pool)
    out += fmt::format("pagellm_kv_pool_planned_bytes{{device=\"{}\"}} {}\n", d.device, d.planned);
  if (e.elastic_pool) metrics(out, e.pool, kElasticPool);
  metric(out, "pagellm_admission_paused", "gauge",
         "1 while the swap guard holds back admission of new sequences",
         e.admission_paused ? 1 : 0);
  metric(out, "pagellm_admission_pauses_total", "counter",
         "Times the swap guard started holding back admission",
         static_cast<double>(e.admission_pauses));
  ttft.render(out, "pagellm_time_to_first_token_seconds",
              "Time from receiving a request to its first generated token");
  inter_token.render(out, "pagellm_inter_token_latency_seconds",
                     "Time between consecutive generated tokens of one choice");
  e2e.render(out, "pagellm_e2e_request_latency_seconds",
             "Time from receiving a request to its last generated token");

  std::lock_guard<std::mutex> lock(mu_);
  out +=
      "# HELP pagellm_http_requests_total HTTP requests answered, by route and status\n"
      "# TYPE pagellm_http_requests_total counter\n";
  for (const auto& [key, n] : http_)
    out += fmt::format("pagellm_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, n);
  out +=
      "# HELP pagellm_request_finished_total Choices finished, by finish reason\n"
      "# TYPE pagellm_request_finished_total counter\n";
  for (const auto& [reason, n] : finishes_)
    out += fmt::format("pagellm_request_finished_total{{finish_reason=\"{}\"}} {}\n", reason, n);
  if (!snap.version.empty()) {
    std::string v;  // a Prometheus label value: backslash and quote escaped
    for (char ch : snap.version) {
      if (ch == '\\' || ch == '"') v += '\\';
      v += ch;
    }
    out += "# HELP pagellm_build_info The pagellm build serving.\n"
           "# TYPE pagellm_build_info gauge\n"
           "pagellm_build_info{version=\"" + v + "\"} 1\n";
  }
  return out;
}

}  // namespace pagellm
