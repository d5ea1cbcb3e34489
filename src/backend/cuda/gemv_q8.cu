#include "backend/cuda/gemv_q8.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dp4a_units.cuh"
#include "backend/cuda/gemv.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8_targets.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr const char* kWhat = "CUDA int8 gemv";
constexpr int kMaxVecs = 16;  // vectors per pass
constexpr int kWarps = 4;     // per CUDA block

// Warps per row, from the row's number of units alone (so a vector's sums
// never depend on the batch): enough that each thread has about one unit of
// a 4096-wide row, with many rows in flight.
inline int warps_per_row(int64_t units) {
  return units >= 128 ? 4 : units >= 64 ? 2 : 1;
}

template <typename F>
void with_warps_per_row(int64_t units, F&& f) {
  switch (warps_per_row(units)) {
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    default:
      return f(std::integral_constant<int, 1>{});
  }
}

__host__ __device__ __forceinline__ ActRow act_row(const Q8ActView& x, int v) {
  const int64_t nb = x.cols / 32;
  return ActRow{x.qs + v * x.cols, x.d + v * nb, x.sum + v * nb};
}

// The bytes of units u0 .. u0 + n of a row (u0 a multiple of 32, so whole
// GGUF blocks; n = min(32, units - u0)).
struct Chunk {
  const uint8_t* src;
  int n;
  int bytes;  // even: every block size is
};
template <DType T>
__host__ __device__ __forceinline__ Chunk chunk_at(const uint8_t* row, int64_t u0, int64_t units) {
  constexpr int kPerBlock = Unit<T>::kPerBlock, kBlockBytes = Unit<T>::kBlockBytes;
  const int n = units - u0 < 32 ? static_cast<int>(units - u0) : 32;
  return Chunk{row + u0 / kPerBlock * kBlockBytes, n, n / kPerBlock * kBlockBytes};
}
template <DType T>
constexpr int kChunkBytes = 32 / Unit<T>::kPerBlock* Unit<T>::kBlockBytes;

// Warp `warp_in_group` of a row's n_warps: lane l sums units u0 + l for
// u0 = 32 warp_in_group, + 32 n_warps, ... against each of the nv vectors of
// x (acc[v]). Each step the warp's 32 units are first copied to shared memory
// (`stage`) by coalesced 4- or 2-byte loads, then each lane expands its unit
// from there: read straight from global memory, lane l's block bytes would sit
// 18 to 44 bytes from lane l + 1's, and every load instruction would cost the
// L1 several wavefronts for a few bytes each.
template <DType T>
__device__ __forceinline__ void warp_partials(const uint8_t* row, int64_t units, int warp_in_group,
                                              int n_warps, const Q8ActView& x, int nv,
                                              uint8_t* stage, float (&acc)[kMaxVecs]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) acc[v] = 0.0f;
  for (int64_t u0 = 32 * warp_in_group; u0 < units; u0 += 32 * n_warps) {
    const Chunk c = chunk_at<T>(row, u0, units);
    __syncwarp();  // the lanes are done with the previous step's units
    if ((reinterpret_cast<uintptr_t>(c.src) & 3) == 0 && c.bytes % 4 == 0) {
      for (int i = lane; i < c.bytes / 4; i += 32)
        reinterpret_cast<uint32_t*>(stage)[i] = reinterpret_cast<const uint32_t*>(c.src)[i];
    } else {
      for (int i = lane; i < c.bytes / 2; i += 32)
        reinterpret_cast<uint16_t*>(stage)[i] = reinterpret_cast<const uint16_t*>(c.src)[i];
    }
    __syncwarp();
    if (lane < c.n) {
      Unit<T> wu;
      wu.load(stage, lane);
#pragma unroll
      for (int v = 0; v < kMaxVecs; ++v)
        if (v < nv) acc[v] = wu.dot(act_row(x, v), u0 + lane, acc[v]);
    }
  }
}

// CUDA block b takes matrix m (tg.first[m] <= b < tg.first[m + 1]);
// its warps w .. w + W take row (b - tg.first[m]) * (kWarps / W) + w / W.
template <DType T, int W>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_q8_kernel(Q8Targets tg, size_t row_bytes, int64_t units, Q8ActView x, int nv) {
  pdl_trigger();
  __shared__ float part[kWarps][kMaxVecs];
  __shared__ __align__(16) uint8_t stage[kWarps][kChunkBytes<T>];
  const int m = tg.of(blockIdx.x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rows = tg.rows[m];
  const int64_t r = static_cast<int64_t>(blockIdx.x - tg.first[m]) * (kWarps / W) + warp / W;
  // The block's rows are constant weights: fetched towards L2 while the
  // kernel before (which writes x) finishes.
  const int64_t r_first = static_cast<int64_t>(blockIdx.x - tg.first[m]) * (kWarps / W);
  const int64_t r_end = min(rows, r_first + kWarps / W);
  if (r_first < r_end)
    prefetch_l2(tg.w[m] + static_cast<size_t>(r_first) * row_bytes,
                static_cast<size_t>(r_end - r_first) * row_bytes);
  pdl_wait();
  float acc[kMaxVecs];
  if (r < rows) {
    warp_partials<T>(tg.w[m] + static_cast<size_t>(r) * row_bytes, units, warp % W, W, x, nv,
                     stage[warp], acc);
  } else {
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) acc[v] = 0.0f;
  }
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) {
    if (v < nv) {
      const float s = warp_sum(acc[v]);
      if (lane == 0) part[warp][v] = s;
    }
  }
  __syncthreads();
  // Lane v of the group's first warp adds the group's warps in order.
  if (warp % W == 0 && lane < nv && r < rows) {
    float s = part[warp][lane];
#pragma unroll
    for (int k = 1; k < W; ++k) s = __fadd_rn(s, part[warp + k][lane]);
    const int64_t at = lane * tg.y_stride[m] + r;
    tg.y[m][at] = s;
    if (tg.add_to[m]) tg.add_to[m][at] = __fadd_rn(tg.add_to[m][at], s);
  }
}

Q8ActView skip_vectors(const Q8ActView& x, int64_t v0) {
  const int64_t nb = x.cols / 32;
  return Q8ActView{x.qs + v0 * x.cols, x.d + v0 * nb, x.sum + v0 * nb, x.cols};
}

}  // namespace

void validate_q8_matmul(const char* what, DType type, const void* w, int64_t rows, int64_t cols,
                        const Q8ActView& x) {
  if (!gemv_q8_supports(type))
    throw ConfigError(fmt::format("{}: weight type {} is not supported", what, dtype_name(type)));
  validate_weight_shape(type, rows, cols);
  validate_weight_pointer(type, w);
  if (x.cols != cols)
    throw ConfigError(fmt::format("{}: activations of {} elements for a matrix of {} columns", what,
                                  x.cols, cols));
  if (reinterpret_cast<uintptr_t>(x.qs) % 16 != 0)
    throw ConfigError(fmt::format("{}: activation codes not 16-byte aligned", what));
}

void validate_q8_targets(const char* what, DType type, int64_t cols, const GemvQ8Target* targets,
                         int n_targets, const Q8ActView& x) {
  if (n_targets < 1 || n_targets > kGemvQ8MaxTargets)
    throw ConfigError(
        fmt::format("{}: {} matrices in one launch (1 to {})", what, n_targets, kGemvQ8MaxTargets));
  for (int i = 0; i < n_targets; ++i)
    validate_q8_matmul(what, type, targets[i].w, targets[i].rows, cols, x);
}

bool gemv_q8_supports(DType type) {
  return dispatch_q8_type(type, [](auto) {});
}

void gemv_q8(const CudaDevice& dev, DType type, const void* w, int64_t rows, int64_t cols,
             const Q8ActView& x, int32_t n_vecs, float* y, int64_t y_stride) {
  const GemvQ8Target t{w, rows, y, y_stride};
  gemv_q8_multi(dev, type, cols, &t, 1, x, n_vecs);
}

void gemv_q8_multi(const CudaDevice& dev, DType type, int64_t cols, const GemvQ8Target* targets,
                   int n_targets, const Q8ActView& x, int32_t n_vecs) {
  validate_q8_targets(kWhat, type, cols, targets, n_targets, x);
  if (n_vecs <= 0) return;
  dev.make_current();
  const size_t row_bytes = dtype_row_bytes(type, cols);
  dispatch_q8_type(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    const int64_t units = cols / Unit<T>::kElems;
    with_warps_per_row(units, [&](auto w_tag) {
      constexpr int W = decltype(w_tag)::value;
      for (int32_t v0 = 0; v0 < n_vecs; v0 += kMaxVecs) {
        const int nv = n_vecs - v0 < kMaxVecs ? n_vecs - v0 : kMaxVecs;
        const Q8Targets tg = make_q8_targets(
            targets, n_targets, v0, [](int64_t rows) { return grid_for(rows, kWarps / W); });
        const unsigned blocks = tg.first[n_targets];
        if (blocks == 0) return;
        launch_pdl(dev, "gemv_q8", gemv_q8_kernel<T, W>, dim3(blocks), dim3(kWarps * 32), 0, tg,
                   row_bytes, units, skip_vectors(x, v0), nv);
      }
    });
  });
}

void gemv_q8_host(DType type, const void* w, int64_t rows, int64_t cols, const Q8ActView& x,
                  int32_t n_vecs, float* y, int64_t y_stride, float* add_to) {
  q8_host_rendition(kWhat, type, w, rows, cols, x, [&](auto tag, size_t row_bytes) {
    constexpr DType T = decltype(tag)::value;
    const int64_t units = cols / Unit<T>::kElems;
    const int n_warps = warps_per_row(units);
    for (int32_t v0 = 0; v0 < n_vecs; v0 += kMaxVecs) {
      const int nv = n_vecs - v0 < kMaxVecs ? n_vecs - v0 : kMaxVecs;
      const Q8ActView xv = skip_vectors(x, v0);
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * row_bytes;
        // lanes[warp][v][lane], as warp_partials: stage 32 units, expand each.
        std::vector<std::vector<std::array<float, 32>>> lanes(
            n_warps, std::vector<std::array<float, 32>>(nv, std::array<float, 32>{}));
        std::vector<uint8_t> stage(kChunkBytes<T>);
        for (int k = 0; k < n_warps; ++k)
          for (int64_t u0 = 32 * k; u0 < units; u0 += 32 * n_warps) {
            const Chunk c = chunk_at<T>(row, u0, units);
            std::memcpy(stage.data(), c.src, static_cast<size_t>(c.bytes));
            for (int lane = 0; lane < c.n; ++lane) {
              Unit<T> wu;
              wu.load(stage.data(), lane);
              for (int v = 0; v < nv; ++v)
                lanes[k][v][lane] = wu.dot(act_row(xv, v), u0 + lane, lanes[k][v][lane]);
            }
          }
        for (int v = 0; v < nv; ++v) {
          float s = warp_sum_host(lanes[0][v].data());
          for (int k = 1; k < n_warps; ++k) s += warp_sum_host(lanes[k][v].data());
          y[(v0 + v) * y_stride + r] = s;
          if (add_to) add_to[(v0 + v) * y_stride + r] += s;
        }
      }
    }
  });
}

}  // namespace pagellm::cuda
