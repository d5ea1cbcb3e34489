#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <string>

#include "backend/cuda/cublas_api_impl.h"
#include "backend/cuda/cuda_check.h"

namespace pagellm::cuda {

namespace {

template <typename F>
void resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  if (!fn)
    throw CudaError(fmt::format("cuBLAS: symbol {} not found in the loaded library", name),
                    CUBLAS_STATUS_NOT_INITIALIZED);
}

CublasApi load() {
  const std::string versioned = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  void* lib = ::dlopen(versioned.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = ::dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = ::dlerror();
    throw CudaError(fmt::format("cannot load cuBLAS ({}): {}", versioned, why ? why : "not found"),
                    CUBLAS_STATUS_NOT_INITIALIZED);
  }
  CublasApi api{};
  resolve(lib, "cublasCreate_v2", api.create);
  resolve(lib, "cublasDestroy_v2", api.destroy);
  resolve(lib, "cublasSetStream_v2", api.set_stream);
  resolve(lib, "cublasGemmEx", api.gemm_ex);
  resolve(lib, "cublasSgemm_v2", api.sgemm);
  resolve(lib, "cublasGetStatusName", api.status_name);
  resolve(lib, "cublasGetStatusString", api.status_string);
  return api;  // the library stays loaded for the life of the process
}

}  // namespace

const CublasApi& cublas_api() {
  // A failed load is retried on the next call (and throws again).
  static std::mutex mu;
  static CublasApi api{};
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!loaded) {
    api = load();
    loaded = true;
  }
  return api;
}

}  // namespace pagellm::cuda
