#include "cli/cli_checks.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

namespace pagellm::cli {

namespace {

// The value as a number, or nullopt-like failure through `ok`.
double number(const std::string& s, bool& ok) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  ok = !s.empty() && end && *end == '\0';
  return v;
}

std::string show(double v) {
  return fmt::format("{}", v);
}

}  // namespace

CLI::Validator at_least(double lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        bool ok;
        const double v = number(s, ok);
        if (ok && v >= lo) return {};
        return fmt::format("must be a number >= {}, got '{}'", show(lo), s);
      },
      fmt::format(">= {}", show(lo)));
}

CLI::Validator above(double lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        bool ok;
        const double v = number(s, ok);
        if (ok && v > lo) return {};
        return fmt::format("must be a number > {}, got '{}'", show(lo), s);
      },
      fmt::format("> {}", show(lo)));
}

CLI::Validator in_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        bool ok;
        const double v = number(s, ok);
        if (ok && v >= lo && v <= hi) return {};
        return fmt::format("must be a number from {} to {}, got '{}'", show(lo), show(hi), s);
      },
      fmt::format("{} to {}", show(lo), show(hi)));
}

}  // namespace pagellm::cli
