#include "cli/version.h"

#include <fmt/format.h>

#include "backend/backend_factory.h"
#include "mpi/mpi_pipeline.h"

#ifndef PAGELLM_GIT_COMMIT
#define PAGELLM_GIT_COMMIT "unknown"
#endif

namespace pagellm::cli {

std::string version_line() {
  return fmt::format("pagellm {} (commit {}, CUDA {}, MPI {}, CPU kernels {})", PAGELLM_VERSION,
                     PAGELLM_GIT_COMMIT, cuda_backend_built() ? "on" : "off",
                     mpi_built() ? "on" : "off",
                     cpu_kernel_isa());
}

}  // namespace pagellm::cli
