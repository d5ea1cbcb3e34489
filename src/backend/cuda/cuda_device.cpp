#include "backend/cuda/cuda_device.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <utility>

#include "backend/cuda/cublas_api_impl.h"
#include "backend/cuda/cuda_check.h"

namespace pagellm::cuda {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the "no device" / "no driver" error
    return 0;
  }
  return n;
}

size_t checked_bytes(int64_t count, size_t elem_size) {
  if (count < 0)
    throw CudaError(fmt::format("negative element count {} for a device buffer", count), 0);
  const auto n = static_cast<size_t>(count);
  if (elem_size != 0 && n > SIZE_MAX / elem_size)
    throw CudaError(
        fmt::format("device buffer of {} elements of {} bytes overflows size_t", n, elem_size), 0);
  return n * elem_size;
}

CudaDevice::CudaDevice(int index) : index_(index) {
  const int n = cuda_device_count();
  if (index < 0 || index >= n)
    throw CudaError(fmt::format("device cuda:{} is not there ({} CUDA device{} found)", index, n,
                                n == 1 ? "" : "s"),
                    cudaErrorInvalidDevice);
  check_cuda(cudaSetDevice(index), "cudaSetDevice", index);
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index),
             "cudaDeviceGetAttribute(compute capability)", index);
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index),
             "cudaDeviceGetAttribute(compute capability)", index);
  cc_ = major * 10 + minor;
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", index);
  stream_ = s;
  cublasHandle_t h = nullptr;
  const CublasApi& blas = cublas_api();
  const cublasStatus_t st = blas.create(&h);
  if (st != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(s);
    check_cublas(st, "cublasCreate", index);
  }
  cublas_ = h;
  const cublasStatus_t st2 = blas.set_stream(h, s);
  if (st2 != CUBLAS_STATUS_SUCCESS) {
    blas.destroy(h);
    cudaStreamDestroy(s);
    check_cublas(st2, "cublasSetStream", index);
  }
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(index_);
  if (cublas_) cublas_api().destroy(static_cast<cublasHandle_t>(cublas_));
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

std::string CudaDevice::name() const {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, index_), "cudaGetDeviceProperties", index_);
  return prop.name;
}

void CudaDevice::make_current() const {
  check_cuda(cudaSetDevice(index_), "cudaSetDevice", index_);
}

void CudaDevice::synchronize() const {
  check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize",
             index_);
}

void CudaDevice::to_device(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  make_current();
  const auto s = static_cast<cudaStream_t>(stream_);
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s),
             fmt::format("cudaMemcpyAsync(host to device, {} bytes)", bytes), index_);
  // Pageable host memory may be read after the call returns: wait, so the
  // caller can reuse it.
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize", index_);
}

void CudaDevice::to_host(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  make_current();
  const auto s = static_cast<cudaStream_t>(stream_);
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s),
             fmt::format("cudaMemcpyAsync(device to host, {} bytes)", bytes), index_);
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize", index_);
}

void CudaDevice::fill_zero(void* dst, size_t bytes) const {
  if (bytes == 0) return;
  make_current();
  check_cuda(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream_)),
             fmt::format("cudaMemsetAsync({} bytes)", bytes), index_);
}

DeviceBuffer::DeviceBuffer(const CudaDevice& device, size_t bytes) {
  reserve(device, bytes);
}

DeviceBuffer::~DeviceBuffer() {
  reset();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : device_(std::exchange(o.device_, -1)),
      ptr_(std::exchange(o.ptr_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = std::exchange(o.device_, -1);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reserve(const CudaDevice& device, size_t bytes) {
  if (ptr_ && bytes <= bytes_ && device_ == device.index()) return;
  // Kernels queued on the stream may still read the old buffer.
  if (ptr_ && device_ == device.index()) device.synchronize();
  reset();
  if (bytes == 0) return;
  device.make_current();
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), fmt::format("cudaMalloc({} bytes)", bytes), device.index());
  ptr_ = p;
  bytes_ = bytes;
  device_ = device.index();
}

void DeviceBuffer::reset() {
  if (ptr_) {
    int prev = 0;
    cudaGetDevice(&prev);
    cudaSetDevice(device_);
    cudaFree(ptr_);  // synchronises with the device; errors here cannot be reported
    cudaSetDevice(prev);
  }
  ptr_ = nullptr;
  bytes_ = 0;
  device_ = -1;
}

}  // namespace pagellm::cuda
