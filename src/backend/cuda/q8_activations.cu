#include "backend/cuda/q8_activations.h"

#include <fmt/format.h>

#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/ops.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8_block.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr int kBlock = 32;
constexpr int kWarps = 4;  // blocks of 32 elements per CUDA block

void validate(int64_t cols, const void* dst) {
  if (cols <= 0 || cols % kBlock != 0)
    throw ConfigError(fmt::format(
        "CUDA int8 activations: a row of {} elements is not whole 32-element blocks", cols));
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0)
    throw ConfigError("CUDA int8 activations: the buffer is not 16-byte aligned");
}

struct Q8Out {
  int8_t* qs;
  float* d;
  int32_t* sum;
};

Q8Out q8_out(void* dst, int64_t n_vecs, int64_t cols) {
  const Q8ActView a = q8_act_view(dst, n_vecs, cols);
  return {const_cast<int8_t*>(a.qs), const_cast<float*>(a.d), const_cast<int32_t*>(a.sum)};
}

// Warp g of the grid quantizes block g % nb of vector g / nb; lane l element l.
// kSiluMul: the values are silu(x) * up (x and up with stride cols).
template <bool kSiluMul>
__global__ void __launch_bounds__(kWarps * 32)
    quantize_kernel(const float* x, const float* up, int64_t x_stride, int64_t n_vecs, int64_t cols,
                    Q8Out out) {
  pdl_start();
  const int64_t nb = cols / kBlock;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (g >= n_vecs * nb) return;
  const int lane = threadIdx.x % 32;
  const int64_t v = g / nb, b = g % nb;
  const int64_t i = v * x_stride + b * kBlock + lane;
  const float xv = kSiluMul ? silu_mul_value(x[i], up[i]) : x[i];
  quantize_lanes(xv, lane, out.qs + v * cols + b * kBlock, out.d + g, out.sum + g);
}

template <bool kSiluMul>
void launch_quantize(const CudaDevice& dev, const float* x, const float* up, int64_t x_stride,
                     int64_t n_vecs, int64_t cols, void* dst, const char* name) {
  validate(cols, dst);
  if (n_vecs <= 0) return;
  dev.make_current();
  const int64_t warps = n_vecs * (cols / kBlock);
  launch_pdl(dev, name, quantize_kernel<kSiluMul>, dim3(grid_for(warps, kWarps)), dim3(kWarps * 32),
             0, x, up, x_stride, n_vecs, cols, q8_out(dst, n_vecs, cols));
}

// Block r (kRmsThreads threads) normalizes row r; warp w quantizes its
// blocks w, w + kRmsThreads / 32, ...
__global__ void __launch_bounds__(kRmsThreads)
    rms_norm_quantize_kernel(const float* x, const float* weight, int64_t cols, float eps,
                             Q8Out out) {
  pdl_start();
  const int64_t r = blockIdx.x, nb = cols / kBlock;
  const float* xr = x + r * cols;
  const float scale = block_rms_scale(xr, cols, eps);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t b = warp; b < nb; b += kRmsThreads / 32) {
    const int64_t c = b * kBlock + lane;
    const float v = __fmul_rn(__fmul_rn(xr[c], scale), weight[c]);
    quantize_lanes(v, lane, out.qs + r * cols + b * kBlock, out.d + r * nb + b,
                   out.sum + r * nb + b);
  }
}

}  // namespace

size_t q8_act_bytes(int64_t n_vecs, int64_t cols) {
  const size_t n = checked_bytes(n_vecs, static_cast<size_t>(cols));
  return n + 2 * checked_bytes(n_vecs, static_cast<size_t>(cols / kBlock) * 4);
}

Q8ActView q8_act_view(const void* base, int64_t n_vecs, int64_t cols) {
  const auto* p = static_cast<const uint8_t*>(base);
  const size_t n = static_cast<size_t>(n_vecs * cols);
  Q8ActView a;
  a.qs = reinterpret_cast<const int8_t*>(p);
  a.d = reinterpret_cast<const float*>(p + n);
  a.sum =
      reinterpret_cast<const int32_t*>(p + n + static_cast<size_t>(n_vecs * (cols / kBlock)) * 4);
  a.cols = cols;
  return a;
}

void quantize_q8_activations(const CudaDevice& dev, const float* x, int64_t x_stride,
                             int64_t n_vecs, int64_t cols, void* dst) {
  launch_quantize<false>(dev, x, nullptr, x_stride, n_vecs, cols, dst, "quantize_q8_activations");
}

void quantize_q8_activations_host(const float* x, int64_t x_stride, int64_t n_vecs, int64_t cols,
                                  void* dst) {
  validate(cols, dst);
  const Q8Out out = q8_out(dst, n_vecs, cols);
  const int64_t nb = cols / kBlock;
  for (int64_t v = 0; v < n_vecs; ++v)
    for (int64_t b = 0; b < nb; ++b)
      quantize_block_host(x + v * x_stride + b * kBlock, out.qs + v * cols + b * kBlock,
                          out.d + v * nb + b, out.sum + v * nb + b);
}

void rms_norm_q8_activations(const CudaDevice& dev, const float* x, const float* weight,
                             int64_t n_vecs, int64_t cols, float eps, void* dst) {
  validate(cols, dst);
  if (n_vecs <= 0) return;
  dev.make_current();
  launch_pdl(dev, "rms_norm_q8_activations", rms_norm_quantize_kernel, dim3(n_vecs),
             dim3(kRmsThreads), 0, x, weight, cols, eps, q8_out(dst, n_vecs, cols));
}

void rms_norm_q8_activations_host(const float* x, const float* weight, int64_t n_vecs, int64_t cols,
                                  float eps, void* dst) {
  validate(cols, dst);
  std::vector<float> h(static_cast<size_t>(n_vecs * cols));
  rms_norm_host(x, weight, h.data(), n_vecs, cols, eps);
  quantize_q8_activations_host(h.data(), cols, n_vecs, cols, dst);
}

void silu_mul_q8_activations(const CudaDevice& dev, const float* gate, const float* up,
                             int64_t n_vecs, int64_t cols, void* dst) {
  launch_quantize<true>(dev, gate, up, cols, n_vecs, cols, dst, "silu_mul_q8_activations");
}

}  // namespace pagellm::cuda
