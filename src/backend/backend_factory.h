// The backend that runs a device's layers, by device name (device/device.h):
// "host" and "cpu:N" run on the CPU backend; "cuda:N" (and the parts
// "cuda:N.K" of a split GPU) on the CUDA backend of GPU N, when pagellm is
// built with CUDA.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace pagellm {

using BackendFactory = std::function<std::unique_ptr<Backend>(const std::string& device)>;

// Throws ConfigError for a bad name, or a CUDA device in a build without
// CUDA; CudaError when the GPU cannot be initialised.
std::unique_ptr<Backend> make_backend(const std::string& device);

// Built with the CUDA backend.
bool cuda_backend_built();

// The CPU backend's kernel variant, for reports (--version, bench): its
// instruction set ("scalar", "avx2", "avx512"; backend/cpu/cpu_isa.h), and
// whether its quantized Rows16 products run on AMX int8 tiles.
const char* cpu_kernel_isa();
bool cpu_kernels_use_amx();

}  // namespace pagellm
