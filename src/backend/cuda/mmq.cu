#include "backend/cuda/mmq.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mmq_tile.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8_targets.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr const char* kWhat = "CUDA int8 mmq";
constexpr int64_t kMaxRowGroups = 65535;  // gridDim.y

// Every row starts 4-byte aligned.
bool rows_aligned4(const void* w, size_t row_bytes) {
  return reinterpret_cast<uintptr_t>(w) % 4 == 0 && row_bytes % 4 == 0;
}

template <DType T>
__global__ void __launch_bounds__(kMmqWarps * 32)
    mmq_kernel(Q8Targets tg, size_t row_bytes, int64_t cols, Q8ActView x, int64_t n,
               bool aligned4) {
  pdl_trigger();
  using M = MmqType<T>;
  __shared__ __align__(16) uint8_t smem[M::kBlockBytes];
  const int m = tg.of(blockIdx.y);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rows = tg.rows[m];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y - tg.first[m]) * kMmqRows;
  // The first vector block's weights towards L2 while the kernel before
  // (which writes x) finishes; the other vector blocks find them there.
  if (blockIdx.x == 0)
    prefetch_l2(tg.w[m] + static_cast<size_t>(r0) * row_bytes,
                static_cast<size_t>(min(static_cast<int64_t>(kMmqRows), rows - r0)) * row_bytes);
  pdl_wait();
  const MmqTokens tk{x, static_cast<int64_t>(blockIdx.x) * kMmqTokens, n};
  const int n_local = static_cast<int>(min(static_cast<int64_t>(kMmqTokens), n - tk.tok0));
  const int tiles = (n_local + 7) / 8;
  const MmqWarpMem mem = mmq_warp_mem<T>(smem + warp * M::kWarpBytes);
  const int64_t nb = cols / 32;
  const int64_t n_rounds = (cols + M::kRoundElems - 1) / M::kRoundElems;

  float acc[kMmqTiles][4];
#pragma unroll
  for (int j = 0; j < kMmqTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;

  MmqRound rd{tg.w[m], row_bytes, rows, r0, 0, 0, aligned4};
  for (int64_t round = warp; round < n_rounds; round += kMmqWarps) {
    const int64_t block0 = round * M::kBlocks;
    rd.round = round;
    rd.blocks = static_cast<int>(min(static_cast<int64_t>(M::kBlocks), nb - block0));
    mmq_stage<T>(lane, rd, mem.stage);
    __syncwarp();
    mmq_expand<T>(lane, rd.blocks, mem);
    __syncwarp();
    mmq_token_scales<T>(lane, tk, block0, rd.blocks, mem);  // over the stage
    __syncwarp();
    for (int b = 0; b < rd.blocks; ++b) {
      uint32_t a[4], h0[4], h1[4];
      mmq_load_a<T>(lane, b, mem, a);
      if constexpr (M::kHalves) {
        mmq_half_a(lane, 0, a, h0);
        mmq_half_a(lane, 1, a, h1);
      }
#pragma unroll
      for (int j = 0; j < kMmqTiles; ++j) {
        if (j < tiles) {  // not a break: a fixed trip count keeps acc in registers
          uint32_t bf[2];
          mmq_load_b(lane, tk, block0 + b, j, bf);
          int c[4], c1[4] = {0, 0, 0, 0};
          if constexpr (M::kHalves) {
            mma_s8(h0, bf, c);
            mma_s8(h1, bf, c1);
          } else {
            mma_s8(a, bf, c);
          }
          mmq_epilogue<T>(lane, b, j, mem, c, c1, acc[j]);
        }
      }
    }
    __syncwarp();  // the next round overwrites the stage and the words
  }

  // The warps' partial sums, added in warp order.
  __syncthreads();  // every warp is done with its shared memory
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int j = 0; j < kMmqTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      red[warp * kMmqTokens * kMmqRedStride + mmq_red_index(lane, j, e)] = acc[j][e];
  __syncthreads();
  for (int i = threadIdx.x; i < kMmqRows * n_local; i += kMmqWarps * 32) {
    const int r = i % kMmqRows, s = i / kMmqRows;
    if (r0 + r >= rows) continue;
    float v = red[s * kMmqRedStride + r];
#pragma unroll
    for (int w = 1; w < kMmqWarps; ++w)
      v = __fadd_rn(v, red[w * kMmqTokens * kMmqRedStride + s * kMmqRedStride + r]);
    const int64_t at = (tk.tok0 + s) * tg.y_stride[m] + r0 + r;
    tg.y[m][at] = v;
    if (tg.add_to[m]) tg.add_to[m][at] = __fadd_rn(tg.add_to[m][at], v);
  }
}

// The kernel's steps for one CUDA block on the host: the same per-lane
// functions, each step run for the 32 lanes of each warp in turn, the mma
// emulated.
template <DType T>
void mmq_block_host(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t r0,
                    const MmqTokens& tk, int64_t cols, bool aligned4, uint8_t* smem, float* y,
                    int64_t y_stride, float* add_to) {
  using M = MmqType<T>;
  const int n_local = static_cast<int>(std::min<int64_t>(kMmqTokens, tk.n - tk.tok0));
  const int tiles = (n_local + 7) / 8;
  const int64_t nb = cols / 32;
  const int64_t n_rounds = (cols + M::kRoundElems - 1) / M::kRoundElems;
  std::vector<float> acc(static_cast<size_t>(kMmqWarps) * 32 * kMmqTiles * 4, 0.0f);
  auto acc_of = [&](int warp, int lane, int j) -> float(&)[4] {
    return *reinterpret_cast<float(*)[4]>(&acc[((warp * 32 + lane) * kMmqTiles + j) * 4]);
  };
  for (int warp = 0; warp < kMmqWarps; ++warp) {
    const MmqWarpMem mem = mmq_warp_mem<T>(smem + warp * M::kWarpBytes);
    MmqRound rd{w, row_bytes, rows, r0, 0, 0, aligned4};
    for (int64_t round = warp; round < n_rounds; round += kMmqWarps) {
      const int64_t block0 = round * M::kBlocks;
      rd.round = round;
      rd.blocks = static_cast<int>(std::min<int64_t>(M::kBlocks, nb - block0));
      for (int lane = 0; lane < 32; ++lane) mmq_stage<T>(lane, rd, mem.stage);
      for (int lane = 0; lane < 32; ++lane) mmq_expand<T>(lane, rd.blocks, mem);
      for (int lane = 0; lane < 32; ++lane) mmq_token_scales<T>(lane, tk, block0, rd.blocks, mem);
      for (int b = 0; b < rd.blocks; ++b) {
        uint32_t a[32][4], h0[32][4], h1[32][4];
        for (int lane = 0; lane < 32; ++lane) {
          mmq_load_a<T>(lane, b, mem, a[lane]);
          mmq_half_a(lane, 0, a[lane], h0[lane]);
          mmq_half_a(lane, 1, a[lane], h1[lane]);
        }
        for (int j = 0; j < tiles; ++j) {
          uint32_t bf[32][2];
          for (int lane = 0; lane < 32; ++lane) mmq_load_b(lane, tk, block0 + b, j, bf[lane]);
          int c[32][4], c1[32][4] = {};
          if constexpr (M::kHalves) {
            mma_s8_host(h0, bf, c);
            mma_s8_host(h1, bf, c1);
          } else {
            mma_s8_host(a, bf, c);
          }
          for (int lane = 0; lane < 32; ++lane)
            mmq_epilogue<T>(lane, b, j, mem, c[lane], c1[lane], acc_of(warp, lane, j));
        }
      }
    }
  }
  float* red = reinterpret_cast<float*>(smem);
  for (int warp = 0; warp < kMmqWarps; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int j = 0; j < kMmqTiles; ++j)
        for (int e = 0; e < 4; ++e)
          red[warp * kMmqTokens * kMmqRedStride + mmq_red_index(lane, j, e)] =
              acc_of(warp, lane, j)[e];
  for (int i = 0; i < kMmqRows * n_local; ++i) {
    const int r = i % kMmqRows, s = i / kMmqRows;
    if (r0 + r >= rows) continue;
    float v = red[s * kMmqRedStride + r];
    for (int k = 1; k < kMmqWarps; ++k)
      v += red[k * kMmqTokens * kMmqRedStride + s * kMmqRedStride + r];
    const int64_t at = (tk.tok0 + s) * y_stride + r0 + r;
    y[at] = v;
    if (add_to) add_to[at] += v;
  }
}

}  // namespace

void mmq_multi(const CudaDevice& dev, DType type, int64_t cols, const GemvQ8Target* targets,
               int n_targets, const Q8ActView& x, int32_t n_vecs) {
  validate_q8_targets(kWhat, type, cols, targets, n_targets, x);
  int64_t groups = 0;
  for (int i = 0; i < n_targets; ++i) groups += (targets[i].rows + kMmqRows - 1) / kMmqRows;
  if (groups > kMaxRowGroups)
    throw ConfigError(fmt::format("{}: {} rows in one launch (at most {})", kWhat,
                                  groups * kMmqRows, kMaxRowGroups * kMmqRows));
  if (n_vecs <= 0 || groups == 0) return;
  dev.make_current();
  const size_t row_bytes = dtype_row_bytes(type, cols);
  dispatch_q8_type(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    const Q8Targets tg = make_q8_targets(
        targets, n_targets, 0, [](int64_t rows) { return (rows + kMmqRows - 1) / kMmqRows; });
    bool aligned4 = true;
    for (int i = 0; i < n_targets; ++i)
      aligned4 = aligned4 && rows_aligned4(targets[i].w, row_bytes);
    const dim3 grid(grid_for(n_vecs, kMmqTokens), static_cast<unsigned>(groups));
    launch_pdl(dev, "mmq", mmq_kernel<T>, grid, dim3(kMmqWarps * 32), 0, tg, row_bytes, cols, x,
               static_cast<int64_t>(n_vecs), aligned4);
  });
}

void mmq_host(DType type, const void* w, int64_t rows, int64_t cols, const Q8ActView& x,
              int32_t n_vecs, float* y, int64_t y_stride, float* add_to) {
  q8_host_rendition(kWhat, type, w, rows, cols, x, [&](auto tag, size_t row_bytes) {
    constexpr DType T = decltype(tag)::value;
    std::vector<uint64_t> smem((MmqType<T>::kBlockBytes + 15) / 8 + 2);
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem.data()) + 15) &
                                            ~uintptr_t{15});
    const bool aligned4 = rows_aligned4(w, row_bytes);
    for (int64_t tok0 = 0; tok0 < n_vecs; tok0 += kMmqTokens)
      for (int64_t r0 = 0; r0 < rows; r0 += kMmqRows)
        mmq_block_host<T>(static_cast<const uint8_t*>(w), row_bytes, rows, r0,
                          MmqTokens{x, tok0, n_vecs}, cols, aligned4, base, y, y_stride, add_to);
  });
}

}  // namespace pagellm::cuda
