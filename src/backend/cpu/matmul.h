// Matrix products Y = X * W^T on the CPU.
//
//   W  n_out rows of n_in elements in its own type, either row-major
//      (tensor/blocks.h layout; row r starts at data + r * row_stride) or, for
//      the packable types, repacked 16 rows at a time (Rows16, packed_weights.h;
//      row_stride is then the bytes per 16-row group).
//   X  `rows` activation rows of n_in floats, row t at x + t * x_stride.
//   Y  rows x n_out floats: Y[t * y_stride + r] = dot(W row r, X row t).
//
// X rows are first quantized (per row) to the dot type of W (see
// activation_quant.h) into a scratch buffer; the product then runs with
// threads splitting the output rows (one output's reduction is never split).
// For several activation rows (prefill), a tile of weight rows is kept in
// cache while every activation row passes over it, so weights are streamed
// from memory once per call.
//
// Results are bit-identical for a given (W row, X row) whatever `rows`, the
// position of the row in X or in W, and the pool's thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/activation.h"
#include "backend/matrix_view.h"
#include "backend/cpu/cpu_isa.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace pagellm::cpu {

// The backend-wide matrix view (backend/matrix_view.h) under the CPU names.
using WeightLayout = pagellm::WeightLayout;
using WeightMatrix = pagellm::MatrixView;

// Reusable working memory, so steady-state calls do not allocate. Not shared
// between concurrent calls.
class MatmulScratch {
 public:
  MatmulScratch() = default;
  ~MatmulScratch();
  MatmulScratch(const MatmulScratch&) = delete;
  MatmulScratch& operator=(const MatmulScratch&) = delete;

  // A 64-byte aligned buffer of at least `bytes`; grows (dropping its
  // contents) when too small, never shrinks.
  void* reserve(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Activation rows in a dot type, ready for matmul. Can be reused for several
// weight matrices sharing n_in and dot type (e.g. the Q, K, V projections).
struct ActivationRows {
  DType dot_type = DType::F32;
  WeightLayout for_layout = WeightLayout::Rows;  // Rows16: split Q8_0 rows
  int64_t n = 0;                                 // elements per row
  int64_t rows = 0;
  const void* data = nullptr;
  size_t row_stride = 0;  // bytes
};

// A transform of each row before it is quantized, computed by the worker that
// quantizes it, so the transformed rows are never written out in full (float
// activations are transformed into the scratch). Row t of x becomes
//   norm:     rms_norm(x row) * weight          (ops.h rms_norm, the same values)
//   glu:      act(x row) * (row t of up)        (ops.h glu, the same values)
struct RowTransform {
  const float* weight = nullptr;  // norm
  float eps = 0;
  const float* up = nullptr;  // glu: row t at up + t * up_stride
  int64_t up_stride = 0;
  Activation act = Activation::kSilu;

  static RowTransform norm(const float* weight, float eps) { return {weight, eps, nullptr, 0}; }
  static RowTransform silu_mul(const float* up, int64_t up_stride) {
    return {nullptr, 0, up, up_stride};
  }
  static RowTransform glu(Activation act, const float* up, int64_t up_stride) {
    return {nullptr, 0, up, up_stride, act};
  }
};

// Quantizes `rows` rows of n floats (row t at x + t * x_stride) for weights of
// type weight_type. For float weights the rows are used in place (no copy);
// otherwise they are written into `scratch`, which the result points into.
ActivationRows quantize_activations(DType weight_type, const float* x, int64_t x_stride,
                                    int64_t rows, int64_t n, ThreadPool& pool,
                                    MatmulScratch& scratch, CpuIsa isa = best_isa(),
                                    const RowTransform* transform = nullptr);

// Y[t * y_stride + r] = dot(W row r, activation row t), t < x.rows, r < w.n_out.
void matmul(const WeightMatrix& w, const ActivationRows& x, float* y, int64_t y_stride,
            ThreadPool& pool, CpuIsa isa = best_isa());

// Work on rows [r0, r1) of a product's output once they are computed for all
// of its activation rows: fn(ctx, y, y_stride, activation rows, r0, r1). In
// matmul_many the thread that computed the rows runs it while they are in
// cache. Calls touch only rows [r0, r1) of y.
struct MatmulEpilogue {
  void (*fn)(const void* ctx, float* y, int64_t y_stride, int64_t x_rows, int64_t r0,
             int64_t r1) = nullptr;
  const void* ctx = nullptr;
};

// One product of matmul_many.
struct MatmulJob {
  const WeightMatrix* w;
  const ActivationRows* x;
  float* y;
  int64_t y_stride;
  const MatmulEpilogue* epilogue = nullptr;
};
// Several products in one parallel region (e.g. Q, K and V; gate and up):
// the same results as matmul() on each (then its epilogue), one barrier
// instead of one per matrix, and the threads' shares balanced over all of
// them. Rows16 jobs share the region; others run on their own.
void matmul_many(const MatmulJob* jobs, size_t n_jobs, ThreadPool& pool, CpuIsa isa = best_isa());

// Activations for the weight matrix w (its type and layout; n = w.n_in),
// transformed first when `transform` is given.
ActivationRows quantize_activations(const WeightMatrix& w, const float* x, int64_t x_stride,
                                    int64_t rows, ThreadPool& pool, MatmulScratch& scratch,
                                    CpuIsa isa = best_isa(),
                                    const RowTransform* transform = nullptr);

// Bytes of one activation row for w in the scratch (64-byte aligned rows).
size_t activation_stride(const WeightMatrix& w);

// quantize_activations followed by matmul.
void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t rows, float* y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch, CpuIsa isa = best_isa());

}  // namespace pagellm::cpu
