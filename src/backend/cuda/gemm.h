// Matrix products for prefill: Y = X W^T for many tokens through cuBLAS. W is
// expanded from its GGUF type to f16 (F16 weights are used in place), X is
// rounded to f16 (a row whose largest |x| passes 2^15 is first scaled down by
// a power of two, and its outputs scaled back, so nothing overflows f16), and
// cublasGemmEx multiplies with f32 accumulation and f32 output.
// F32 weights are multiplied in place in f32 (cublasSgemm), any cols.
//
// Layouts (device memory):
//   W  [rows][cols] of `type`, GGUF row-major (as in gemv.h; same types)
//   x  [n][cols] f32, row stride x_stride floats
//   y  [n][rows] f32, row stride y_stride floats (>= rows)
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_device.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {

// Scratch space of gemm(): the f16 copies of W and X, grown on demand.
struct GemmWorkspace {
  DeviceBuffer w_f16;
  DeviceBuffer x_f16;
  DeviceBuffer x_exp;  // each X row's power-of-two scale (int32)
};

// Bytes of f16 scratch gemm() needs for W (0 for F16 weights) and for X.
size_t gemm_weight_scratch_bytes(DType type, int64_t rows, int64_t cols);  // 0 for F16/F32
size_t gemm_activation_scratch_bytes(int64_t n, int64_t cols);

// dst [rows][cols] f16 = W expanded (same types as gemv).
void dequantize_to_f16(const CudaDevice& dev, DType type, const void* w, int64_t rows, int64_t cols,
                       void* dst);

void gemm(const CudaDevice& dev, GemmWorkspace& ws, DType type, const void* w, int64_t rows,
          int64_t cols, const float* x, int64_t x_stride, int64_t n, float* y, int64_t y_stride);

}  // namespace pagellm::cuda
