#include "kvcache/kv_pool.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "tensor/convert.h"
#include "tensor/fp16.h"
#include "util/error.h"
#include "util/sizes.h"

namespace pagellm {

size_t KvPoolShape::slot_bytes() const {
  return static_cast<size_t>(n_kv_heads) * dtype_row_bytes(dtype, head_dim);
}
size_t KvPoolShape::layer_bytes() const {
  return 2 * static_cast<size_t>(num_blocks) * block_size * slot_bytes();
}
size_t KvPoolShape::total_bytes() const {
  return static_cast<size_t>(layer_end - layer_begin) * layer_bytes();
}

KvPool::KvPool(const KvPoolShape& shape) : shape_(shape) {
  if (shape.dtype != DType::F16 && shape.dtype != DType::F32 && shape.dtype != DType::Q8_0)
    throw ConfigError(fmt::format("unsupported KV cache type '{}' (supported: f16, f32, q8_0)",
                                  dtype_name(shape.dtype)));
  if (shape.dtype == DType::Q8_0 && shape.head_dim % 32 != 0)
    throw ConfigError(
        fmt::format("a q8_0 KV cache needs a head size that is a multiple of 32 "
                    "(this model's is {})",
                    shape.head_dim));
  if (shape.block_size <= 0 || shape.num_blocks < 0 || shape.n_kv_heads <= 0 ||
      shape.head_dim <= 0 || shape.layer_end < shape.layer_begin)
    throw ConfigError(fmt::format("invalid KV pool shape: {} blocks of {} tokens, {} heads of {}",
                                  shape.num_blocks, shape.block_size, shape.n_kv_heads,
                                  shape.head_dim));
  bytes_ = shape.total_bytes();
  if (bytes_ == 0) return;
  // Anonymous mapping: zeroed pages, returned to the OS on destruction;
  // populated now so the cache the plan reserved is really resident (a cache
  // that faults in later could meet a machine that has run out of memory).
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED)
    throw SystemError(
        errno_message("cannot allocate " + format_size(bytes_) + " of KV cache", errno));
  data_ = static_cast<uint8_t*>(p);
}

KvPool::~KvPool() {
  if (data_) ::munmap(data_, bytes_);
}

uint8_t* KvPool::layer_base(int32_t layer) const {
  if (!has_layer(layer))
    throw Error(fmt::format("layer {} is not in this KV pool [{}, {})", layer, shape_.layer_begin,
                            shape_.layer_end));
  return data_ + static_cast<size_t>(layer - shape_.layer_begin) * shape_.layer_bytes();
}

void* KvPool::k(int32_t layer) {
  return layer_base(layer);
}
void* KvPool::v(int32_t layer) {
  return layer_base(layer) + shape_.layer_bytes() / 2;
}
const void* KvPool::k(int32_t layer) const {
  return layer_base(layer);
}
const void* KvPool::v(int32_t layer) const {
  return layer_base(layer) + shape_.layer_bytes() / 2;
}

void KvPool::write(int32_t layer, int64_t slot, const float* k_row, const float* v_row) {
  const int64_t n = static_cast<int64_t>(shape_.n_kv_heads) * shape_.head_dim;
  uint8_t* kd = static_cast<uint8_t*>(k(layer)) + static_cast<size_t>(slot) * shape_.slot_bytes();
  uint8_t* vd = static_cast<uint8_t*>(v(layer)) + static_cast<size_t>(slot) * shape_.slot_bytes();
  if (shape_.dtype == DType::F32) {
    std::memcpy(kd, k_row, static_cast<size_t>(n) * 4);
    std::memcpy(vd, v_row, static_cast<size_t>(n) * 4);
    return;
  }
  if (shape_.dtype == DType::Q8_0) {
    const size_t row_bytes = dtype_row_bytes(DType::Q8_0, shape_.head_dim);
    for (int32_t h = 0; h < shape_.n_kv_heads; ++h) {
      quantize_row(DType::Q8_0, k_row + h * shape_.head_dim, kd + h * row_bytes, shape_.head_dim);
      quantize_row(DType::Q8_0, v_row + h * shape_.head_dim, vd + h * row_bytes, shape_.head_dim);
    }
    return;
  }
  quantize_row(DType::F16, k_row, kd, n);  // F16C where the CPU has it
  quantize_row(DType::F16, v_row, vd, n);
}

void KvPool::copy_block(int32_t src, int32_t dst) {
  const size_t block_bytes = static_cast<size_t>(shape_.block_size) * shape_.slot_bytes();
  for (int32_t l = shape_.layer_begin; l < shape_.layer_end; ++l)
    for (uint8_t* base : {static_cast<uint8_t*>(k(l)), static_cast<uint8_t*>(v(l))})
      std::memcpy(base + static_cast<size_t>(dst) * block_bytes,
                  base + static_cast<size_t>(src) * block_bytes, block_bytes);
}

}  // namespace pagellm
