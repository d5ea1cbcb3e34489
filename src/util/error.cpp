#include "util/error.h"

#include <cstring>

namespace pagellm {

std::string errno_message(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

}  // namespace pagellm
