// A CUDA device as the backend uses it: the device index, one stream on which
// every kernel of this backend runs in order, and a cuBLAS handle bound to
// that stream; plus DeviceBuffer, an owned allocation of device memory.
//
// No CUDA types here: the stream and cuBLAS handle are handed out as opaque
// pointers (cudaStream_t / cublasHandle_t) for the .cu files of this folder.
// All failures throw CudaError (backend/cuda/cuda_check.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace pagellm::cuda {

// Number of usable CUDA devices; 0 (never an exception) when there is no GPU,
// no driver, or the driver is too old for this runtime.
int cuda_device_count();

// Bytes of `count` elements of `elem_size` bytes; throws CudaError on a
// negative count or when the product overflows size_t.
size_t checked_bytes(int64_t count, size_t elem_size);

class CudaDevice {
 public:
  // Selects device `index` (0-based) and creates its stream and cuBLAS handle.
  // Throws CudaError if the device does not exist or cannot be initialised.
  explicit CudaDevice(int index = 0);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int index() const { return index_; }
  std::string name() const;                       // "NVIDIA H100 80GB HBM3"
  int compute_capability() const { return cc_; }  // 90 for sm_90
  void* stream() const { return stream_; }        // cudaStream_t
  void* cublas() const { return cublas_; }        // cublasHandle_t (on stream())
  // Makes this the calling thread's current device (the kernels' host
  // functions do it themselves).
  void make_current() const;
  // Waits for everything queued on the stream; throws what a kernel raised.
  void synchronize() const;

  // Host <-> device copies on the stream. to_device returns once `src` may be
  // reused; to_host returns once `dst` holds the data (it waits for the
  // kernels queued before it: e.g. the logits of a step).
  void to_device(void* dst, const void* src, size_t bytes) const;
  void to_host(void* dst, const void* src, size_t bytes) const;
  void fill_zero(void* dst, size_t bytes) const;

 private:
  int index_ = 0;
  int cc_ = 0;
  void* stream_ = nullptr;
  void* cublas_ = nullptr;
};

// Device memory of one CudaDevice, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const CudaDevice& device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  // Grows to at least `bytes` (contents are not kept when it grows).
  void reserve(const CudaDevice& device, size_t bytes);
  void reset();

 private:
  int device_ = -1;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pagellm::cuda
