#include "backend/cuda/gemm.h"

#include <fmt/format.h>

#include <climits>

#include "backend/cuda/cublas_api_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/gemv.h"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr int kThreads = 256;

// One thread per 32-element unit.
template <DType T>
__global__ void dequant_f16_kernel(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t units,
                                   __half* dst) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * units) return;
  const int64_t r = k / units, u = k % units;
  float v[kUnit];
  dequant_unit<T>(w + static_cast<size_t>(r) * row_bytes, u, v);
  __half2* o = reinterpret_cast<__half2*>(dst + r * units * kUnit + u * kUnit);
#pragma unroll
  for (int i = 0; i < kUnit / 2; ++i) o[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
}

__global__ void to_f16_kernel(const float* x, int64_t x_stride, int64_t n, int64_t cols,
                              __half* dst) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * cols) return;
  const int64_t r = k / cols, c = k % cols;
  dst[k] = __float2half_rn(x[r * x_stride + c]);
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
  const int64_t work = rows * (cols / kUnit);
  if (work == 0) return;
  dev.make_current();
  const size_t row_bytes = dtype_row_bytes(type, cols);
  dispatch_weight_type(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    dequant_f16_kernel<T>
        <<<grid_for(work, kThreads), kThreads, 0, static_cast<cudaStream_t>(dev.stream())>>>(
            static_cast<const uint8_t*>(w), row_bytes, rows, cols / kUnit,
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
  to_f16_kernel<<<grid_for(n * cols, kThreads), kThreads, 0,
                  static_cast<cudaStream_t>(dev.stream())>>>(x, x_stride, n, cols,
                                                             ws.x_f16.as<__half>());
  check_launch("to_f16", dev.index());
  // Column-major view: W is a cols x rows matrix (ld cols), X cols x n (ld
  // cols), Y rows x n (ld y_stride): Y = W^T X.
  check_cublas(
      cublas_api().gemm_ex(static_cast<cublasHandle_t>(dev.cublas()), CUBLAS_OP_T, CUBLAS_OP_N,
                           static_cast<int>(rows), static_cast<int>(n), static_cast<int>(cols),
                           &alpha, w16, CUDA_R_16F, static_cast<int>(cols), ws.x_f16.data(),
                           CUDA_R_16F, static_cast<int>(cols), &beta, y, CUDA_R_32F,
                           static_cast<int>(y_stride), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      fmt::format("cublasGemmEx({} x {} x {} f16, f32 accumulate)", n, rows, cols), dev.index());
}

}  // namespace pagellm::cuda
