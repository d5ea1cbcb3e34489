#include "backend/cuda/gemm.h"

#include <fmt/format.h>

#include <climits>

#include "backend/cuda/cublas_api_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/gemv.h"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr int kThreads = 256;

// One thread per quad (4 elements): consecutive threads write consecutive
// 8-byte pieces of dst.
template <DType T>
__global__ void dequant_f16_kernel(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t quads,
                                   __half* dst) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * quads) return;
  const int64_t r = k / quads, q = k % quads;
  float v[kQuad];
  dequant_quad<T>(w + static_cast<size_t>(r) * row_bytes, q, v);
  __half2* o = reinterpret_cast<__half2*>(dst + (r * quads + q) * kQuad);
  o[0] = __floats2half2_rn(v[0], v[1]);
  o[1] = __floats2half2_rn(v[2], v[3]);
}

// Row r of x to f16, scaled by 2^-e[r], e[r] the smallest e >= 0 that brings
// max |x| of the row to at most 2^15, so no value overflows f16 (65504):
// rows within range (e = 0) are rounded as they are; a row with larger
// activations (e.g. the FFN-down input of a "massive activation" token) keeps
// its relative precision, and unscale_rows_kernel multiplies its outputs back
// (both scalings are powers of two: exact). One block per row.
__global__ void __launch_bounds__(kThreads)
    to_f16_rows_kernel(const float* x, int64_t x_stride, int64_t cols, __half* dst, int32_t* exps) {
  const int64_t r = blockIdx.x;
  const float* row = x + r * x_stride;
  float m = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, fabsf(row[c]));
  m = warp_max(m);
  __shared__ float part[kThreads / 32];
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = m;
  __syncthreads();
  float mx = part[0];
#pragma unroll
  for (int i = 1; i < kThreads / 32; ++i) mx = fmaxf(mx, part[i]);
  int e = 0;
  if (isfinite(mx) && mx > 32768.0f) frexpf(mx / 32768.0f, &e);  // mx / 2^e <= 32768
  const float s = ldexpf(1.0f, -e);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads)
    dst[r * cols + c] = __float2half_rn(row[c] * s);
  if (threadIdx.x == 0) exps[r] = e;
}

// y row t *= 2^e[t] where e[t] > 0.
__global__ void unscale_rows_kernel(float* y, int64_t y_stride, int64_t n, int64_t rows,
                                    const int32_t* exps) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * rows) return;
  const int64_t t = k / rows, r = k % rows;
  const int e = exps[t];
  if (e != 0) y[t * y_stride + r] = ldexpf(y[t * y_stride + r], e);
}

}  // namespace

size_t gemm_weight_scratch_bytes(DType type, int64_t rows, int64_t cols) {
  if (type == DType::F16 || type == DType::F32) return 0;
  return checked_bytes(rows, checked_bytes(cols, 2));
}

size_t gemm_activation_scratch_bytes(int64_t n, int64_t cols) {
  return checked_bytes(n, checked_bytes(cols, 2));
}

void dequantize_to_f16(const CudaDevice& dev, DType type, const void* w, int64_t rows, int64_t cols,
                       void* dst) {
  validate_weight_shape(type, rows, cols);
  validate_weight_pointer(type, w);
  const int64_t work = rows * (cols / kQuad);
  if (work == 0) return;
  dev.make_current();
  const size_t row_bytes = dtype_row_bytes(type, cols);
  dispatch_weight_type(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    dequant_f16_kernel<T>
        <<<grid_for(work, kThreads), kThreads, 0, static_cast<cudaStream_t>(dev.stream())>>>(
            static_cast<const uint8_t*>(w), row_bytes, rows, cols / kQuad,
            static_cast<__half*>(dst));
  });
  check_launch("dequantize_to_f16", dev.index());
}

void gemm(const CudaDevice& dev, GemmWorkspace& ws, DType type, const void* w, int64_t rows,
          int64_t cols, const float* x, int64_t x_stride, int64_t n, float* y, int64_t y_stride) {
  if (type != DType::F32 || cols <= 0) validate_weight_shape(type, rows, cols);
  if (rows > INT_MAX || cols > INT_MAX || n > INT_MAX || y_stride > INT_MAX || y_stride < rows)
    throw ConfigError(fmt::format("CUDA gemm: shape {} x {} x {} (y stride {}) out of cuBLAS range",
                                  n, rows, cols, y_stride));
  if (rows == 0 || n == 0) return;
  dev.make_current();
  const float alpha = 1.0f, beta = 0.0f;
  if (type == DType::F32) {
    // F32 weights in place, f32 math (cuBLAS's default mode: no TF32).
    check_cublas(
        cublas_api().sgemm(static_cast<cublasHandle_t>(dev.cublas()), CUBLAS_OP_T, CUBLAS_OP_N,
                           static_cast<int>(rows), static_cast<int>(n), static_cast<int>(cols),
                           &alpha, static_cast<const float*>(w), static_cast<int>(cols), x,
                           static_cast<int>(x_stride), &beta, y, static_cast<int>(y_stride)),
        fmt::format("cublasSgemm({} x {} x {})", n, rows, cols), dev.index());
    return;
  }
  const void* w16 = w;
  if (type != DType::F16) {
    ws.w_f16.reserve(dev, gemm_weight_scratch_bytes(type, rows, cols));
    dequantize_to_f16(dev, type, w, rows, cols, ws.w_f16.data());
    w16 = ws.w_f16.data();
  }
  ws.x_f16.reserve(dev, gemm_activation_scratch_bytes(n, cols));
  ws.x_exp.reserve(dev, checked_bytes(n, sizeof(int32_t)));
  const auto stream = static_cast<cudaStream_t>(dev.stream());
  to_f16_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      x, x_stride, cols, ws.x_f16.as<__half>(), ws.x_exp.as<int32_t>());
  check_launch("to_f16_rows", dev.index());
  // Column-major view: W is a cols x rows matrix (ld cols), X cols x n (ld
  // cols), Y rows x n (ld y_stride): Y = W^T X.
  check_cublas(
      cublas_api().gemm_ex(static_cast<cublasHandle_t>(dev.cublas()), CUBLAS_OP_T, CUBLAS_OP_N,
                           static_cast<int>(rows), static_cast<int>(n), static_cast<int>(cols),
                           &alpha, w16, CUDA_R_16F, static_cast<int>(cols), ws.x_f16.data(),
                           CUDA_R_16F, static_cast<int>(cols), &beta, y, CUDA_R_32F,
                           static_cast<int>(y_stride), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      fmt::format("cublasGemmEx({} x {} x {} f16, f32 accumulate)", n, rows, cols), dev.index());
  unscale_rows_kernel<<<grid_for(n * rows, kThreads), kThreads, 0, stream>>>(
      y, y_stride, n, rows, ws.x_exp.as<int32_t>());
  check_launch("unscale_rows", dev.index());
}

}  // namespace pagellm::cuda
