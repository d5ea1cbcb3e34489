// Process memory as the kernel counts it (resident set size).
#pragma once

#include <cstdint>

namespace pagellm {

// Current resident set size in bytes (from /proc/self/statm).
uint64_t current_rss_bytes();
// Peak resident set size in bytes (getrusage ru_maxrss).
uint64_t peak_rss_bytes();

}  // namespace pagellm
