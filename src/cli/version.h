// What `pagellm --version` prints: the version and how this binary was built.
#pragma once

#include <string>

namespace pagellm::cli {

// "pagellm 0.3.0 (commit 1a2b3c4, CUDA on, MPI off, CPU kernels avx512)".
std::string version_line();

}  // namespace pagellm::cli
