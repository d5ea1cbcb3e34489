// general.architecture -> Architecture.
#pragma once

#include <string>
#include <vector>

#include "model/architecture.h"

namespace pagellm {

// The family named `name`; FormatError naming `path` and listing the
// supported ones otherwise.
const Architecture& find_architecture(const std::string& name, const std::string& path);
// Null when there is none.
const Architecture* lookup_architecture(const std::string& name);
// Every registered name, in registry order.
std::vector<std::string> architecture_names();

}  // namespace pagellm
