#include "backend/backend.h"

#include <memory>
#include <utility>

namespace pagellm {

void Backend::copy_to(Backend& to, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (uses_host_memory()) return to.upload(dst, src, bytes);
  if (to.uses_host_memory()) return download(dst, src, bytes);
  std::unique_ptr<uint8_t[]> staging(new uint8_t[bytes]);
  download(staging.get(), src, bytes);
  to.upload(dst, staging.get(), bytes);
}

void Backend::norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                          const MatmulOutput* outs, size_t n_outs) {
  rms_norm(x, norm, h, rows, outs[0].w->n_in, eps);
  matmul(h, rows, outs, n_outs);
}

BackendBuffer::BackendBuffer(Backend& backend, size_t bytes) {
  ensure(backend, bytes);
}

BackendBuffer& BackendBuffer::operator=(BackendBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    backend_ = std::exchange(o.backend_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void BackendBuffer::ensure(Backend& backend, size_t bytes) {
  if (backend_ == &backend && bytes_ >= bytes) return;
  reset();
  if (bytes == 0) return;
  data_ = backend.allocate(bytes);
  backend_ = &backend;
  bytes_ = bytes;
}

void BackendBuffer::reset() {
  if (data_) backend_->deallocate(data_, bytes_);
  backend_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace pagellm
