// Stores this step's K and V rows into a paged KV cache on the device, through
// a slot mapping: the CUDA counterpart of KvPool::write (kvcache/kv_pool.h),
// byte for byte the same cache contents.
//
// Layouts:
//   k, v     [n_tokens][n_kv_heads * head_dim] f32, row strides k_stride / v_stride floats
//   slots    [n_tokens] int64: token t goes to cache slot slots[t] (slot =
//            block_id * block_size + offset in block); a negative slot skips
//            the token (padding)
//   k_cache, v_cache  [n_slots][n_kv_heads][head_dim] of cache_type:
//            F32, F16 (round to nearest even), or Q8_0 (each head row is
//            head_dim / 32 blocks {f16 d; i8 qs[32]}, d = absmax / 127,
//            q = round-half-away(x / d): the CPU quantizer's rounding)
//            v_cache == k_cache: a latent cache (MLA, one row per token and
//            layer): only k is stored, v is not read (KvLayerView::v_dim)
//
// rope_kv_write also rotates this step's q rows in place and k's rows on
// their way to the cache (rope.cuh's table and pair arithmetic, as
// CudaRopeCache::apply), in the same launch:
//   q        [n_tokens][n_heads * head_dim] f32, row stride q_stride floats
//   cos_sin  [n_tokens][n_rot / 2] {cos, sin} f32 pairs (rope.cuh)
// k itself is left as it was: the cache holds the rotated rows.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_device.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {

struct KvWriteArgs {
  const float* k = nullptr;
  int64_t k_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const int64_t* slots = nullptr;
  int32_t n_tokens = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  DType cache_type = DType::F16;
};

// Throws ConfigError for an unsupported cache type or a Q8_0 head_dim that is
// not a multiple of 32 (checked on the host, before any CUDA call).
void validate(const KvWriteArgs& args);

void kv_write(const CudaDevice& dev, const KvWriteArgs& args);

// RoPE of a layer's q and k, the k half of the fused launch (see the top).
struct KvRopeArgs {
  float* q = nullptr;
  int64_t q_stride = 0;
  int32_t n_heads = 0;
  int32_t n_rot = 0;  // rotated dims of each head (even, at most head_dim)
  bool neox = false;  // pairs (i, i + n_rot/2), else (2i, 2i + 1)
  const float* cos_sin = nullptr;
};

// Throws ConfigError for what validate(kv) rejects and for a bad n_rot or
// head count (checked on the host, before any CUDA call).
void validate(const KvWriteArgs& kv, const KvRopeArgs& rope);

// rope + kv_write in one launch: the same q rows and cache bytes as
// CudaRopeCache::apply on q and k followed by kv_write.
void rope_kv_write(const CudaDevice& dev, const KvWriteArgs& kv, const KvRopeArgs& rope);

// The same stores on the host (host pointers), by the kernel's own per-element
// code with the warp's maximum spelled out: tests check the cache bytes
// without a GPU.
void kv_write_host(const KvWriteArgs& args);
void rope_kv_write_host(const KvWriteArgs& kv, const KvRopeArgs& rope);

}  // namespace pagellm::cuda
