#include "backend/cuda/cuda_check.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/cuda/cublas_api_impl.h"

namespace pagellm::cuda {

std::string cuda_error_message(std::string_view call, int device, std::string_view reason) {
  if (device < 0) return fmt::format("{} on the CUDA runtime: {}", call, reason);
  return fmt::format("{} on cuda:{}: {}", call, device, reason);
}

std::string cuda_error_string(int code) {
  const char* s = cudaGetErrorString(static_cast<cudaError_t>(code));
  return s ? std::string(s) : fmt::format("CUDA error {}", code);
}

std::string cublas_status_string(int status) {
  const auto st = static_cast<cublasStatus_t>(status);
  const char* name = nullptr;
  const char* text = nullptr;
  try {
    name = cublas_api().status_name(st);
    text = cublas_api().status_string(st);
  } catch (const Error&) {
    // cuBLAS cannot be loaded: the number alone.
  }
  if (!name || !text || std::string_view(text).find("unknown") != std::string_view::npos)
    return fmt::format("cuBLAS status {}", status);
  return fmt::format("{}: {}", name, text);
}

void check_cuda(int code, std::string_view call, int device) {
  if (code == cudaSuccess) return;
  cudaGetLastError();  // reset the non-sticky error state
  throw CudaError(cuda_error_message(call, device, cuda_error_string(code)), code);
}

void check_cublas(int status, std::string_view call, int device) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(cuda_error_message(call, device, cublas_status_string(status)), status);
}

void check_launch(std::string_view kernel, int device) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw CudaError(
        cuda_error_message(fmt::format("launch of {}", kernel), device, cuda_error_string(err)),
        err);
}

}  // namespace pagellm::cuda
