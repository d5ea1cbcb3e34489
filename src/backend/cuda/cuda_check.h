// Checked CUDA and cuBLAS calls. Every runtime / cuBLAS call of the CUDA
// backend goes through check_cuda / check_cublas; a failure throws CudaError
// whose message names the call and the device, e.g.
//   "cudaMalloc(1048576 bytes) on cuda:0: out of memory"
// Status codes are passed as plain ints (cudaError_t / cublasStatus_t values),
// so this header needs no CUDA headers.
#pragma once

#include <string>
#include <string_view>

#include "util/error.h"

namespace pagellm::cuda {

// A CUDA runtime, driver or cuBLAS call failed, or a kernel could not run.
class CudaError : public Error {
 public:
  CudaError(const std::string& msg, int code) : Error(msg), code_(code) {}
  int code() const { return code_; }  // the cudaError_t / cublasStatus_t value

 private:
  int code_;
};

// "<call> on cuda:<device>: <reason>" (device < 0: "on the CUDA runtime").
std::string cuda_error_message(std::string_view call, int device, std::string_view reason);

// The runtime's text for a cudaError_t ("out of memory", ...); works without a GPU.
std::string cuda_error_string(int code);
// "CUBLAS_STATUS_ALLOC_FAILED: resource allocation failed", or "cuBLAS status N".
std::string cublas_status_string(int status);

// Throws CudaError unless code == cudaSuccess (0). Clears the runtime's
// last-error state first, so a non-sticky error does not resurface later.
void check_cuda(int code, std::string_view call, int device);
// Throws CudaError unless status == CUBLAS_STATUS_SUCCESS (0).
void check_cublas(int status, std::string_view call, int device);
// After a kernel launch: checks cudaGetLastError() (bad configuration, no
// kernel image for this GPU, ...). Does not wait for the kernel.
void check_launch(std::string_view kernel, int device);

}  // namespace pagellm::cuda
