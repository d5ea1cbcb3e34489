#include "backend/cuda/gemv.h"

#include <fmt/format.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/pdl.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

// Vectors per launch: each is computed the same way whatever their number
// (one accumulator per vector, quads in order, one warp sum), so results do
// not depend on the batch; more vectors per launch read the weights fewer times.
constexpr int kMaxVecs = 16;
constexpr int kWarpsPerBlock = 4;

// Rows per warp: with several vectors a warp takes 4 rows, so each float4 of
// x it loads serves 4 rows (the loads of x, not of W, bound the kernel then);
// with one or two it takes one, for more warps in flight. A row's sums are the
// same bits either way (lane_partials).
inline int rows_per_warp(int nv) {
  return nv <= 2 ? 1 : 4;
}

// acc + w . x, rounded step by step (a product, three FMAs, an add) so that
// every row and vector count gives the same bits, and the host the device's.
__host__ __device__ __forceinline__ float dot4_add(float acc, const float (&w)[kQuad], float4 x) {
#ifdef __CUDA_ARCH__
  float s = __fmul_rn(w[0], x.x);
  s = __fmaf_rn(w[1], x.y, s);
  s = __fmaf_rn(w[2], x.z, s);
  s = __fmaf_rn(w[3], x.w, s);
  return __fadd_rn(acc, s);
#else
  float s = w[0] * x.x;
  s = std::fma(w[1], x.y, s);
  s = std::fma(w[2], x.z, s);
  s = std::fma(w[3], x.w, s);
  return acc + s;
#endif
}

// Lane `lane`'s partial sums of rows r0 .. r0 + nr (nr <= R): quads k = lane,
// lane + 32, ... (a warp's 32 quads are 128 consecutive elements, so both the
// weight blocks and the float4s of x are read coalesced),
// acc[i][v] += w_{r0+i}[4k..4k+4) . x_v[4k..4k+4). Shared by the kernel and
// its host rendition (gemv_rows_host).
template <DType T, int R>
__host__ __device__ __forceinline__ void lane_partials(const uint8_t* w, size_t row_bytes,
                                                       int64_t r0, int nr, int64_t quads, int lane,
                                                       const float* x, int64_t x_stride, int nv,
                                                       float (&acc)[R][kMaxVecs]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) acc[i][v] = 0.0f;
#pragma unroll 2
  for (int64_t k = lane; k < quads; k += 32) {
    float wv[R][kQuad];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (i < nr) {
        dequant_quad<T>(w + static_cast<size_t>(r0 + i) * row_bytes, k, wv[i]);
      } else {
#pragma unroll
        for (int e = 0; e < kQuad; ++e) wv[i][e] = 0.0f;
      }
    }
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) {
      if (v < nv) {
        const float4 xx = reinterpret_cast<const float4*>(x + v * x_stride)[k];
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i][v] = dot4_add(acc[i][v], wv[i], xx);
      }
    }
  }
}

// The vectors in chunks of at most kMaxVecs: calls f(v0, nv, TypeTag<T>{},
// std::integral_constant<int, R>{}) for the chunk of nv vectors from v0, the
// weight type and R = rows_per_warp(nv).
template <typename F>
void for_each_vec_chunk(DType type, int32_t n_vecs, F&& f) {
  for (int32_t v0 = 0; v0 < n_vecs; v0 += kMaxVecs) {
    const int nv = n_vecs - v0 < kMaxVecs ? n_vecs - v0 : kMaxVecs;
    dispatch_weight_type(type, [&](auto tag) {
      if (rows_per_warp(nv) == 1)
        f(v0, nv, tag, std::integral_constant<int, 1>{});
      else
        f(v0, nv, tag, std::integral_constant<int, 4>{});
    });
  }
}

// Warp g of the grid takes rows R g .. R g + R.
template <DType T, int R>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t quads, const float* x,
                int64_t x_stride, float* y, int64_t y_stride, int nv) {
  pdl_start();
  const int lane = threadIdx.x % 32;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * R;
  if (r0 >= rows) return;
  const int nr = rows - r0 < R ? static_cast<int>(rows - r0) : R;
  float acc[R][kMaxVecs];
  lane_partials<T, R>(w, row_bytes, r0, nr, quads, lane, x, x_stride, nv, acc);
#pragma unroll
  for (int i = 0; i < R; ++i) {
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) {
      if (i < nr && v < nv) {
        const float s = warp_sum(acc[i][v]);
        if (lane == 0) y[v * y_stride + r0 + i] = s;
      }
    }
  }
}

// F32 rows of any length (toy models: stories260K's n_ff is 172): one warp
// per row, lanes striding over elements.
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_f32_any_kernel(const float* w, int64_t rows, int64_t cols, const float* x,
                        int64_t x_stride, float* y, int64_t y_stride, int nv) {
  pdl_start();
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
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
    for (int64_t k = 0; k < cols / kQuad; ++k) {
      float w[kQuad];
      dequant_quad<T>(static_cast<const uint8_t*>(row), k, w);
      for (int i = 0; i < kQuad; ++i) dst[k * kQuad + i] = w[i];
    }
  });
}

namespace {

// The checks gemv() makes before a launch (not the F32 any-length case).
void validate_gemv(DType type, const void* w, int64_t rows, int64_t cols, const float* x,
                   int64_t x_stride, int32_t n_vecs) {
  validate_weight_shape(type, rows, cols);
  validate_weight_pointer(type, w);
  // x is read as float4: 16-byte aligned vectors.
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || (n_vecs > 1 && x_stride % 4 != 0))
    throw ConfigError(
        fmt::format("CUDA gemv: x must be 16-byte aligned with a stride that is a multiple of 4 "
                    "floats (stride {})",
                    x_stride));
}

}  // namespace

void validate_weight_pointer(DType type, const void* w) {
  if (reinterpret_cast<uintptr_t>(w) % dtype_alignment(type) != 0)
    throw ConfigError(fmt::format("CUDA backend: {} weights at an address that is not {}-aligned",
                                  dtype_name(type), dtype_alignment(type)));
}

void gemv_rows_host(DType type, const void* w, int64_t rows, int64_t cols, const float* x,
                    int64_t x_stride, float* y, int64_t y_stride, int32_t n_vecs) {
  validate_gemv(type, w, rows, cols, x, x_stride, n_vecs);
  const size_t row_bytes = dtype_row_bytes(type, cols);
  for_each_vec_chunk(type, n_vecs, [&](int32_t v0, int nv, auto tag, auto r_tag) {
    constexpr DType T = decltype(tag)::value;
    constexpr int R = decltype(r_tag)::value;
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
      const int nr = rows - r0 < R ? static_cast<int>(rows - r0) : R;
      std::vector<float> part(32 * R * kMaxVecs);  // [lane][i][v]
      auto at = [&](int lane, int i, int v) -> float& {
        return part[(static_cast<size_t>(lane) * R + i) * kMaxVecs + v];
      };
      for (int lane = 0; lane < 32; ++lane) {
        float acc[R][kMaxVecs];
        lane_partials<T, R>(static_cast<const uint8_t*>(w), row_bytes, r0, nr, cols / kQuad, lane,
                            x + v0 * x_stride, x_stride, nv, acc);
        for (int i = 0; i < R; ++i)
          for (int v = 0; v < kMaxVecs; ++v) at(lane, i, v) = acc[i][v];
      }
      for (int i = 0; i < nr; ++i)
        for (int v = 0; v < nv; ++v) {
          float lanes[32];
          for (int lane = 0; lane < 32; ++lane) lanes[lane] = at(lane, i, v);
          y[(v0 + v) * y_stride + r0 + i] = warp_sum_host(lanes);
        }
    }
  });
}

void gemv(const CudaDevice& dev, DType type, const void* w, int64_t rows, int64_t cols,
          const float* x, int64_t x_stride, float* y, int64_t y_stride, int32_t n_vecs) {
  if (type == DType::F32 && cols > 0 && cols % kUnit != 0) {
    validate_weight_pointer(type, w);
    if (rows <= 0 || n_vecs <= 0) return;
    dev.make_current();
    for (int32_t v0 = 0; v0 < n_vecs; v0 += kMaxVecs) {
      const int nv = n_vecs - v0 < kMaxVecs ? n_vecs - v0 : kMaxVecs;
      launch_pdl(dev, "gemv_f32_any", gemv_f32_any_kernel, dim3(grid_for(rows, kWarpsPerBlock)),
                 dim3(kWarpsPerBlock * 32), 0, static_cast<const float*>(w), rows, cols,
                 x + v0 * x_stride, x_stride, y + v0 * y_stride, y_stride, nv);
    }
    return;
  }
  validate_gemv(type, w, rows, cols, x, x_stride, n_vecs);
  if (rows == 0 || n_vecs <= 0) return;
  dev.make_current();
  const size_t row_bytes = dtype_row_bytes(type, cols);
  for_each_vec_chunk(type, n_vecs, [&](int32_t v0, int nv, auto tag, auto r_tag) {
    constexpr DType T = decltype(tag)::value;
    constexpr int R = decltype(r_tag)::value;
    launch_pdl(dev, "gemv", gemv_kernel<T, R>, dim3(grid_for(rows, kWarpsPerBlock * R)),
               dim3(kWarpsPerBlock * 32), 0, static_cast<const uint8_t*>(w), row_bytes, rows,
               cols / kQuad, x + v0 * x_stride, x_stride, y + v0 * y_stride, y_stride, nv);
  });
}

}  // namespace pagellm::cuda
