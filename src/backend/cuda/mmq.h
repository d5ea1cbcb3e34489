// Matrix products over int8 activations on the tensor cores, for batches past
// the GEMV's (gemv_q8.h): Y = X W^T for a few dozen to a few hundred vectors,
// W in its GGUF storage type, X quantized by quantize_q8_activations
// (q8_activations.h). Each 32-element block of 16 rows against 8 vectors is
// one int8 mma (mma.sync m16n8k32, sm_80 and newer): the exact integer sums
// of the CPU's and the GEMV's dot products, scaled into f32 per block. The
// weights are read once per 64 vectors, from their quantized bytes: no f16
// copy of W (gemm.h's ~4.6 bytes of traffic per weight), and the products
// run on the tensor cores instead of one dp4a per 4 weights per vector.
//
// Layouts (device memory): as gemv_q8.h (same types; W rows
// dtype_row_bytes(type, cols) apart, 2-byte aligned; x a Q8ActView; y
// [n_vecs][rows] f32 with vector stride y_stride).
//
// Work: a CUDA block takes 16 rows of one matrix and 64 vectors; its 4 warps
// take every 4th round (128 elements of the 32-element block types, 256 of the
// K types) of those rows, staging each round's bytes in shared memory with
// coalesced loads and expanding them to signed bytes there (mmq_tile.cuh);
// the warps' partial sums meet in shared memory in warp order. A vector's
// result does not depend on the other vectors of the call (its bits differ
// from gemv_q8's, which sums in another order).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/gemv_q8.h"
#include "backend/cuda/q8_activations.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {

// Up to kGemvQ8MaxTargets matrices of one type and width against the same
// vectors, in one launch, on dev's stream (add_to as gemv_q8_multi). Throws
// ConfigError (before any launch) as validate_q8_matmul, and when the
// matrices have more than 1,048,560 rows in all.
void mmq_multi(const CudaDevice& dev, DType type, int64_t cols, const GemvQ8Target* targets,
               int n_targets, const Q8ActView& x, int32_t n_vecs);

// The same for one matrix on the host (host memory), by the kernel's own
// per-lane code with the mma emulated from its fragment layout: tests check
// the kernel's indexing and arithmetic without a GPU.
void mmq_host(DType type, const void* w, int64_t rows, int64_t cols, const Q8ActView& x,
              int32_t n_vecs, float* y, int64_t y_stride, float* add_to = nullptr);

}  // namespace pagellm::cuda
