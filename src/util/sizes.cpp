#include "util/sizes.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "util/error.h"

namespace pagellm {

uint64_t parse_size(const std::string& text) {
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s, &end);
  if (end == s || errno != 0 || !std::isfinite(value) || value < 0)
    throw ConfigError("invalid size '" + text +
                      "': expected a number with an optional unit (e.g. 4GiB)");
  std::string unit;
  for (const char* p = end; *p; ++p)
    if (!std::isspace(static_cast<unsigned char>(*p))) unit += static_cast<char>(std::tolower(*p));
  double mult = 1;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k" || unit == "kib")
    mult = 1024.0;
  else if (unit == "m" || unit == "mib")
    mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    mult = 1e3;
  else if (unit == "mb")
    mult = 1e6;
  else if (unit == "gb")
    mult = 1e9;
  else if (unit == "tb")
    mult = 1e12;
  else
    throw ConfigError("invalid size '" + text + "': unknown unit '" + unit + "'");
  double bytes = value * mult;
  if (bytes >= 1.8e19) throw ConfigError("invalid size '" + text + "': too large");
  return static_cast<uint64_t>(bytes);
}

std::string format_size(uint64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_count(int64_t n) {
  const bool neg = n < 0;
  uint64_t v = neg ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return neg ? "-" + out : out;
}

}  // namespace pagellm
