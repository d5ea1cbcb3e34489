#include "backend/cuda/q8_activations.h"

#include <fmt/format.h>

#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

constexpr int kBlock = 32;
constexpr int kWarps = 4;  // blocks of 32 elements per CUDA block

// The block's f16 scale d (as f32) and 1 / d (0 for a block of zeros), from
// its largest magnitude: the CPU's arithmetic (division, f16 rounding).
__host__ __device__ __forceinline__ void block_scale(float amax, float* d, float* id) {
#ifdef __CUDA_ARCH__
  *d = f16_to_f32(f32_to_f16(__fdiv_rn(amax, 127.0f)));
  *id = *d != 0.0f ? __fdiv_rn(1.0f, *d) : 0.0f;
#else
  *d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
  *id = *d != 0.0f ? 1.0f / *d : 0.0f;
#endif
}

// round-half-even(x * id) clamped to [-127, 127]; NaN gives 0.
__host__ __device__ __forceinline__ int8_t code_of(float x, float id) {
#ifdef __CUDA_ARCH__
  const float r = rintf(__fmul_rn(x, id));
#else
  const float r = std::nearbyint(x * id);
#endif
  if (r >= 127.0f) return 127;
  if (r <= -127.0f) return -127;
  return r == r ? static_cast<int8_t>(r) : 0;
}

void validate(int64_t cols, const void* dst) {
  if (cols <= 0 || cols % kBlock != 0)
    throw ConfigError(fmt::format(
        "CUDA int8 activations: a row of {} elements is not whole 32-element blocks", cols));
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0)
    throw ConfigError("CUDA int8 activations: the buffer is not 16-byte aligned");
}

// Warp g of the grid quantizes block g % nb of vector g / nb; lane l element l.
__global__ void __launch_bounds__(kWarps * 32)
    quantize_kernel(const float* x, int64_t x_stride, int64_t n_vecs, int64_t cols, int8_t* qs,
                    float* d_out, int32_t* sum_out) {
  const int64_t nb = cols / kBlock;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (g >= n_vecs * nb) return;
  const int lane = threadIdx.x % 32;
  const int64_t v = g / nb, b = g % nb;
  const float xv = x[v * x_stride + b * kBlock + lane];
  const float amax = warp_max(fabsf(xv));
  float d, id;
  block_scale(amax, &d, &id);
  const int8_t q = code_of(xv, id);
  qs[v * cols + b * kBlock + lane] = q;
  int s = q;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) {
    d_out[g] = d;
    sum_out[g] = s;
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
  validate(cols, dst);
  if (n_vecs <= 0) return;
  const Q8ActView a = q8_act_view(dst, n_vecs, cols);
  dev.make_current();
  const int64_t warps = n_vecs * (cols / kBlock);
  quantize_kernel<<<grid_for(warps, kWarps), kWarps * 32, 0,
                    static_cast<cudaStream_t>(dev.stream())>>>(
      x, x_stride, n_vecs, cols, const_cast<int8_t*>(a.qs), const_cast<float*>(a.d),
      const_cast<int32_t*>(a.sum));
  check_launch("quantize_q8_activations", dev.index());
}

void quantize_q8_activations_host(const float* x, int64_t x_stride, int64_t n_vecs, int64_t cols,
                                  void* dst) {
  validate(cols, dst);
  const Q8ActView a = q8_act_view(dst, n_vecs, cols);
  const int64_t nb = cols / kBlock;
  for (int64_t v = 0; v < n_vecs; ++v)
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + v * x_stride + b * kBlock;
      float amax = 0.0f;  // max is exact in any order, as warp_max's tree
      for (int l = 0; l < kBlock; ++l) amax = std::fmax(amax, std::fabs(xb[l]));
      float d, id;
      block_scale(amax, &d, &id);
      int s = 0;
      for (int l = 0; l < kBlock; ++l) {
        const int8_t q = code_of(xb[l], id);
        const_cast<int8_t*>(a.qs)[v * cols + b * kBlock + l] = q;
        s += q;
      }
      const_cast<float*>(a.d)[v * nb + b] = d;
      const_cast<int32_t*>(a.sum)[v * nb + b] = s;
    }
}

}  // namespace pagellm::cuda
