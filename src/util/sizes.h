// Byte sizes as people write them: "4GiB", "512MiB", "1.5G", "1000000".
#pragma once

#include <cstdint>
#include <string>

namespace pagellm {

// Parses a byte size. Binary (KiB, MiB, GiB, TiB; K, M, G, T) and decimal
// (KB, MB, GB, TB) units, case-insensitive, optional "B". Throws ConfigError.
uint64_t parse_size(const std::string& text);

// "1.50 GiB", "512.00 MiB", "17 B".
std::string format_size(uint64_t bytes);

// A count with thousands separators: "12,288", "-1,000".
std::string format_count(int64_t n);

}  // namespace pagellm
