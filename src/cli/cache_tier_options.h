// --cache-host / --cache-dir / --cache-disk: the prefix cache's tiers beyond
// the pool (kvcache/host_tier.h, kvcache/disk_tier.h) for the commands that
// run an engine (serve, generate); `plan` takes them to charge their host RAM.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/plan_options.h"
#include "kvcache/disk_tier.h"
#include "kvcache/host_tier.h"

namespace pagellm::cli {

struct CacheTierOptions {
  std::string host;  // --cache-host SIZE (empty: no host tier)
  std::string dir;   // --cache-dir DIR (empty: no disk tier)
  std::string disk;  // --cache-disk SIZE (default 4 GiB)

  void add_to(CLI::App& sub);
  // The tiers' options (dir empty / 0 bytes: none). Throw ConfigError for a bad size.
  DiskTierOptions options() const;
  HostTierOptions host_options() const;
  // The planner charges the host tier and the disk tier's read-ahead
  // staging to host RAM.
  void apply(PlanOptions& plan) const {
    plan.host_tier_bytes = host_options().max_bytes;
    plan.disk_staging_bytes = dir.empty() ? 0 : options().prefetch_bytes;
  }
};

}  // namespace pagellm::cli
