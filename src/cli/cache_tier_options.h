// --cache-dir / --cache-disk: the prefix cache's disk tier (kvcache/
// disk_tier.h) for the commands that run an engine (serve, generate).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kvcache/disk_tier.h"

namespace pagellm::cli {

struct CacheTierOptions {
  std::string dir;   // --cache-dir DIR (empty: no disk tier)
  std::string disk;  // --cache-disk SIZE (default 4 GiB)

  void add_to(CLI::App& sub);
  // The tier's options (dir empty: none). Throws ConfigError for a bad size.
  DiskTierOptions options() const;
};

}  // namespace pagellm::cli
