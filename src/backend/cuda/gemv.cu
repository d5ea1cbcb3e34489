#include "backend/cuda/gemv.h"

#include <fmt/format.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

// Vectors per launch: each is computed the same way whatever their number
// (one accumulator per vector, units in order, one warp sum), so results do
// not depend on the batch; more vectors per launch read the weights fewer times.
constexpr int kMaxVecs = 16;
constexpr int kRowsPerBlock = 4;  // one warp per row

template <DType T>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    gemv_kernel(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t units, const float* x,
                int64_t x_stride, float* y, int64_t y_stride, int nv) {
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;
  const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
  float acc[kMaxVecs];
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) acc[v] = 0.0f;
  for (int64_t u = lane; u < units; u += 32) {
    float wv[kUnit];
    dequant_unit<T>(row, u, wv);
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) {
      if (v < nv) {
        const float4* xv = reinterpret_cast<const float4*>(x + v * x_stride + u * kUnit);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kUnit / 4; ++i) {
          const float4 xx = xv[i];
          s +=
              wv[4 * i] * xx.x + wv[4 * i + 1] * xx.y + wv[4 * i + 2] * xx.z + wv[4 * i + 3] * xx.w;
        }
        acc[v] += s;
      }
    }
  }
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) {
    if (v < nv) {
      const float s = warp_sum(acc[v]);
      if (lane == 0) y[v * y_stride + r] = s;
    }
  }
}

// F32 rows of any length (toy models: stories260K's n_ff is 172): one warp
// per row, lanes striding over elements.
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    gemv_f32_any_kernel(const float* w, int64_t rows, int64_t cols, const float* x,
                        int64_t x_stride, float* y, int64_t y_stride, int nv) {
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;
  const float* row = w + r * cols;
  for (int v = 0; v < nv; ++v) {
    float acc = 0.0f;
    for (int64_t c = lane; c < cols; c += 32) acc += row[c] * x[v * x_stride + c];
    acc = warp_sum(acc);
    if (lane == 0) y[v * y_stride + r] = acc;
  }
}

}  // namespace

bool cuda_supports_weight_type(DType type) {
  return dispatch_weight_type(type, [](auto) {});
}

void validate_weight_shape(DType type, int64_t rows, int64_t cols) {
  if (!cuda_supports_weight_type(type))
    throw ConfigError(
        fmt::format("CUDA backend: weight type {} is not supported", dtype_name(type)));
  if (rows < 0 || cols <= 0 || cols % kUnit != 0 || cols % dtype_block_size(type) != 0)
    throw ConfigError(fmt::format("CUDA backend: a {} x {} {} matrix is not whole 32-element units",
                                  rows, cols, dtype_name(type)));
}

void dequantize_row_host(DType type, const void* row, int64_t cols, float* dst) {
  validate_weight_shape(type, 1, cols);
  dispatch_weight_type(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    for (int64_t u = 0; u < cols / kUnit; ++u) {
      float w[kUnit];
      dequant_unit<T>(static_cast<const uint8_t*>(row), u, w);
      for (int i = 0; i < kUnit; ++i) dst[u * kUnit + i] = w[i];
    }
  });
}

void gemv(const CudaDevice& dev, DType type, const void* w, int64_t rows, int64_t cols,
          const float* x, int64_t x_stride, float* y, int64_t y_stride, int32_t n_vecs) {
  if (type == DType::F32 && cols > 0 && cols % kUnit != 0) {
    if (rows <= 0 || n_vecs <= 0) return;
    dev.make_current();
    const auto s = static_cast<cudaStream_t>(dev.stream());
    for (int32_t v0 = 0; v0 < n_vecs; v0 += kMaxVecs) {
      const int nv = n_vecs - v0 < kMaxVecs ? n_vecs - v0 : kMaxVecs;
      gemv_f32_any_kernel<<<grid_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, s>>>(
          static_cast<const float*>(w), rows, cols, x + v0 * x_stride, x_stride, y + v0 * y_stride,
          y_stride, nv);
      check_launch("gemv_f32_any", dev.index());
    }
    return;
  }
  validate_weight_shape(type, rows, cols);
  // x is read as float4: 16-byte aligned vectors.
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || (n_vecs > 1 && x_stride % 4 != 0))
    throw ConfigError(
        fmt::format("CUDA gemv: x must be 16-byte aligned with a stride that is a multiple of 4 "
                    "floats (stride {})",
                    x_stride));
  if (rows == 0 || n_vecs <= 0) return;
  dev.make_current();
  const size_t row_bytes = dtype_row_bytes(type, cols);
  const auto s = static_cast<cudaStream_t>(dev.stream());
  const unsigned grid = grid_for(rows, kRowsPerBlock);
  for (int32_t v0 = 0; v0 < n_vecs; v0 += kMaxVecs) {
    const int nv = n_vecs - v0 < kMaxVecs ? n_vecs - v0 : kMaxVecs;
    dispatch_weight_type(type, [&](auto tag) {
      constexpr DType T = decltype(tag)::value;
      gemv_kernel<T><<<grid, kRowsPerBlock * 32, 0, s>>>(static_cast<const uint8_t*>(w), row_bytes,
                                                         rows, cols / kUnit, x + v0 * x_stride,
                                                         x_stride, y + v0 * y_stride, y_stride, nv);
    });
    check_launch("gemv", dev.index());
  }
}

}  // namespace pagellm::cuda
