// Flag validators whose messages say what is allowed in words ("--n-predict:
// must be a number >= 0, got -1"), in place of CLI11's numeric ranges.
#pragma once

#include <CLI/CLI.hpp>

namespace pagellm::cli {

CLI::Validator at_least(double lo);
CLI::Validator above(double lo);  // strictly greater
CLI::Validator in_range(double lo, double hi);

}  // namespace pagellm::cli
