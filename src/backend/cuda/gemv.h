// Matrix-vector products for decode: y = W x for a few f32 vectors, with W in
// its GGUF storage type, read once per call (the weights are never expanded).
//
// Layouts (device memory):
//   W  [rows][cols] of `type`, GGUF row-major: each row is cols / block_size
//      blocks (tensor/blocks.h), rows `dtype_row_bytes(type, cols)` apart
//   x  [n_vecs][cols] f32, vector stride x_stride floats (x 16-byte aligned,
//      x_stride a multiple of 4)
//   y  [n_vecs][rows] f32, vector stride y_stride floats
// Supported types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K,
// IQ4_NL, IQ4_XS, MXFP4 (no int8 path: gemv_q8 leaves it to this kernel); cols a multiple of 32 (256 for the K types and IQ4_XS; F32
// any length, with a plain kernel). A warp takes one row (1-2 vectors) or 4
// (3 or more); lane L expands quads (4 elements) L, L + 32, ... of its rows
// (dequant.cuh) and dots each with the matching float4 of every vector (up to
// 16 vectors per pass; more take several passes): a warp reads 128
// consecutive elements of W and of x per step.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_device.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {

// True for the weight types the CUDA GEMV / GEMM / embedding kernels read.
bool cuda_supports_weight_type(DType type);

// Throws ConfigError for an unsupported type or a cols that is not a whole
// number of blocks (on the host, before any CUDA call).
void validate_weight_shape(DType type, int64_t rows, int64_t cols);

// dst[0..cols) = the row at `row` expanded by the kernels' own dequantization
// code, run on the host: lets tests check the device layouts without a GPU.
void dequantize_row_host(DType type, const void* row, int64_t cols, float* dst);

// Throws ConfigError when w is not aligned for the type (2 bytes; F32 4;
// MXFP4 1): the kernels read blocks in 16-bit halves (MXFP4 in bytes).
void validate_weight_pointer(DType type, const void* w);

// gemv() computed on the host by the kernel's own per-lane code, lanes and
// warp sum spelled out (host memory): tests check the kernel's indexing and
// arithmetic without a GPU.
void gemv_rows_host(DType type, const void* w, int64_t rows, int64_t cols, const float* x,
                    int64_t x_stride, float* y, int64_t y_stride, int32_t n_vecs);

void gemv(const CudaDevice& dev, DType type, const void* w, int64_t rows, int64_t cols,
          const float* x, int64_t x_stride, float* y, int64_t y_stride, int32_t n_vecs);

}  // namespace pagellm::cuda
