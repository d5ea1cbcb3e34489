// Int8 activations for the CUDA decode GEMV (gemv_q8.h): each f32 vector cut
// into 32-element blocks, each block quantized as the CPU's Q8_0 activations
// (backend/cpu/activation_quant.h): d = amax / 127 rounded to f16,
// q = round-half-even(x * (1 / d)) clamped to [-127, 127] (0 for a block of
// zeros), so the codes and scales are the CPU's bytes.
//
// Layout (one allocation, n_vecs vectors of `cols` elements, cols a multiple
// of 32, nb = cols / 32):
//   qs   [n_vecs][cols]  int8      codes (vector v at qs + v * cols; 16-byte
//                                  aligned when the allocation is)
//   d    [n_vecs][nb]    f32       each block's scale (the f16 value, widened)
//   sum  [n_vecs][nb]    int32     each block's sum of codes
// A vector's bytes depend on that vector only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_device.h"

namespace pagellm::cuda {

// Pointers into a quantized batch of vectors (device or host memory).
struct Q8ActView {
  const int8_t* qs = nullptr;
  const float* d = nullptr;
  const int32_t* sum = nullptr;
  int64_t cols = 0;
};

// Bytes of n_vecs quantized vectors of cols elements (cols a multiple of 32).
size_t q8_act_bytes(int64_t n_vecs, int64_t cols);

// The view of the buffer at `base` holding n_vecs vectors of cols elements.
Q8ActView q8_act_view(const void* base, int64_t n_vecs, int64_t cols);

// Quantizes x [n_vecs][x_stride] f32 (the first cols of each row) into dst
// (device memory, q8_act_bytes(n_vecs, cols) bytes), on dev's stream. Throws
// ConfigError when cols is not a positive multiple of 32 or dst is not
// 16-byte aligned.
void quantize_q8_activations(const CudaDevice& dev, const float* x, int64_t x_stride,
                             int64_t n_vecs, int64_t cols, void* dst);

// The same, on the host (host memory), by the kernel's own per-lane code.
void quantize_q8_activations_host(const float* x, int64_t x_stride, int64_t n_vecs, int64_t cols,
                                  void* dst);

// rms_norm (ops.h) of x [n_vecs][cols] with `weight`, quantized into dst in
// the same launch: the bytes of rms_norm into a buffer, then
// quantize_q8_activations. The f32 rows are not written.
void rms_norm_q8_activations(const CudaDevice& dev, const float* x, const float* weight,
                             int64_t n_vecs, int64_t cols, float eps, void* dst);
void rms_norm_q8_activations_host(const float* x, const float* weight, int64_t n_vecs, int64_t cols,
                                  float eps, void* dst);

// silu(gate) * up (ops.h silu_mul) of gate, up [n_vecs][cols], quantized into
// dst in the same launch (gate is not written): the bytes of silu_mul, then
// quantize_q8_activations.
void silu_mul_q8_activations(const CudaDevice& dev, const float* gate, const float* up,
                             int64_t n_vecs, int64_t cols, void* dst);

}  // namespace pagellm::cuda
