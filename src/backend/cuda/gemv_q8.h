// Matrix-vector products for decode over int8 activations: y = W x for up to
// a few dozen vectors, with W in its GGUF storage type and x quantized by
// quantize_q8_activations (q8_activations.h), the products summed in integers
// by dp4a (dp4a_units.cuh) as the CPU's dot products do with its Q8_0
// activations. Several times fewer instructions per weight than expanding
// the weights to f32, so decode runs at the memory's pace.
//
// Layouts (device memory):
//   W  [rows][cols] of `type`, GGUF row-major, rows dtype_row_bytes(type, cols)
//      apart (2-byte aligned)
//   x  n_vecs quantized vectors of cols elements (Q8ActView)
//   y  [n_vecs][rows] f32, vector stride y_stride floats
// Types: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (cols a multiple of 32), Q4_K,
// Q5_K, Q6_K (of 256). Each row is taken by a group of 1, 2 or 4 warps (by
// the row's number of units, never by n_vecs); thread t of the group takes
// units t, t + group size, ... and keeps one f32 sum per vector; the sums
// meet by warp shuffles, then across the group's warps in order. A warp
// copies its 32 units' bytes to shared memory with coalesced loads before
// its lanes expand them. Up to 16
// vectors per pass, more take several passes: a vector's result does not
// depend on the others in the call.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/q8_activations.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {

// True for the weight types gemv_q8 takes.
bool gemv_q8_supports(DType type);

// Throws ConfigError (messages start with `what`) for an unsupported type, a
// cols that is not whole blocks, a misaligned W, or activations of another
// width or not 16-byte aligned.
void validate_q8_matmul(const char* what, DType type, const void* w, int64_t rows, int64_t cols,
                        const Q8ActView& x);

// One matrix of a launch: y = W x, W [rows][cols] (2-byte aligned), y with
// vector stride y_stride floats.
struct GemvQ8Target {
  const void* w = nullptr;
  int64_t rows = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  float* add_to = nullptr;  // then add_to[v][r] += y[v][r] (stride y_stride), as add_inplace
};
constexpr int kGemvQ8MaxTargets = 3;  // q, k and v of a layer in one launch

// validate_q8_matmul for every target of a launch of `n_targets` matrices;
// ConfigError too for a count outside 1 .. kGemvQ8MaxTargets.
void validate_q8_targets(const char* what, DType type, int64_t cols, const GemvQ8Target* targets,
                         int n_targets, const Q8ActView& x);

// Up to kGemvQ8MaxTargets matrices of one type and width against the same
// vectors, in one launch per 16 vectors (each row's sums as gemv_q8's).
void gemv_q8_multi(const CudaDevice& dev, DType type, int64_t cols, const GemvQ8Target* targets,
                   int n_targets, const Q8ActView& x, int32_t n_vecs);

// y = W x on dev's stream. Throws ConfigError for an unsupported type, a cols
// that is not whole blocks, or a misaligned W (on the host, before any launch).
void gemv_q8(const CudaDevice& dev, DType type, const void* w, int64_t rows, int64_t cols,
             const Q8ActView& x, int32_t n_vecs, float* y, int64_t y_stride);

// The same on the host (host memory) by the kernel's own per-thread code,
// with the warp shuffles and the group's sum spelled out: tests check the
// kernel's indexing and arithmetic without a GPU.
void gemv_q8_host(DType type, const void* w, int64_t rows, int64_t cols, const Q8ActView& x,
                  int32_t n_vecs, float* y, int64_t y_stride, float* add_to = nullptr);

}  // namespace pagellm::cuda
