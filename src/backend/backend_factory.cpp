#include "backend/backend_factory.h"

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "device/device.h"
#include "util/error.h"
#ifndef PAGELLM_HAVE_CUDA_BACKEND
#define PAGELLM_HAVE_CUDA_BACKEND 0
#endif
#if PAGELLM_HAVE_CUDA_BACKEND
#include "backend/cuda/cuda_backend.h"
#endif

namespace pagellm {

bool cuda_backend_built() {
  return PAGELLM_HAVE_CUDA_BACKEND != 0;
}

const char* cpu_kernel_isa() {
  return cpu::isa_name(cpu::best_isa());
}

bool cpu_kernels_use_amx() {
  return cpu::best_isa() == cpu::CpuIsa::Avx512 && cpu::amx_int8_available();
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  const Device d = parse_device_name(name);
  if (d.kind == DeviceKind::kCpu) return std::make_unique<cpu::CpuBackend>();
#if PAGELLM_HAVE_CUDA_BACKEND
  return std::make_unique<cuda::CudaBackend>(d.index, d.name());
#else
  throw ConfigError(fmt::format(
      "device {}: this pagellm was built without CUDA (configure with -DPAGELLM_CUDA=ON)", name));
#endif
}

}  // namespace pagellm
