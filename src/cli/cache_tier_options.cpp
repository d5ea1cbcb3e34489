#include "cli/cache_tier_options.h"

#include "util/error.h"
#include "util/sizes.h"

namespace pagellm::cli {

void CacheTierOptions::add_to(CLI::App& sub) {
  sub.add_option("--cache-host", host,
                 "Keep up to SIZE of prefix-cache blocks evicted from the KV pool in host RAM "
                 "(pinned for a GPU's pool), restored by copy on a prefix hit; charged to the "
                 "plan's host memory (default: none)");
  auto* d = sub.add_option("--cache-dir", dir,
                           "Keep the prefix cache's full blocks in DIR too, so that prefixes "
                           "survive a restart (shared safely by several servers)");
  sub.add_option("--cache-disk", disk,
                 "At most SIZE of block files in --cache-dir, least recently used deleted first "
                 "(default: 4 GiB)")
      ->needs(d);
}

DiskTierOptions CacheTierOptions::options() const {
  DiskTierOptions o;
  o.dir = dir;
  if (!disk.empty()) {
    o.max_bytes = parse_size(disk);
    if (o.max_bytes == 0) throw ConfigError("--cache-disk must be more than 0 bytes");
  }
  return o;
}

}  // namespace pagellm::cli

namespace pagellm::cli {

HostTierOptions CacheTierOptions::host_options() const {
  HostTierOptions o;
  if (!host.empty()) o.max_bytes = parse_size(host);
  return o;
}

}  // namespace pagellm::cli
