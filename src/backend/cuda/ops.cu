#include "backend/cuda/ops.h"

#include <fmt/format.h>

#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/gemv.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/rope.cuh"
#include "util/error.h"

namespace pagellm::cuda {

using namespace detail;

namespace {

// Thread i of a row's block writes quads i, i + blockDim.x, ...: coalesced.
template <DType T>
__global__ void embedding_kernel(const uint8_t* table, size_t row_bytes, int64_t n_vocab,
                                 int64_t quads, const int32_t* tokens, float* out) {
  pdl_start();
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  float* o = out + t * quads * kQuad;
  for (int64_t k = threadIdx.x; k < quads; k += blockDim.x) {
    float w[kQuad] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (id >= 0 && id < n_vocab) dequant_quad<T>(table + static_cast<size_t>(id) * row_bytes, k, w);
#pragma unroll
    for (int i = 0; i < kQuad; ++i) o[k * kQuad + i] = w[i];
  }
}

// One block of kRmsThreads threads per row; a null weight: unweighted
// (Gemma 4's v norm).
__global__ void __launch_bounds__(kRmsThreads)
    rms_norm_kernel(const float* x, const float* weight, float* out, int64_t n, float eps) {
  pdl_start();
  const float* xr = x + blockIdx.x * n;
  float* o = out + blockIdx.x * n;
  const float scale = block_rms_scale(xr, n, eps);
  for (int64_t i = threadIdx.x; i < n; i += kRmsThreads) {
    const float v = __fmul_rn(xr[i], scale);
    o[i] = weight ? __fmul_rn(v, weight[i]) : v;
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t count) {
  pdl_start();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = __fadd_rn(x[i], y[i]);
}

__global__ void silu_mul_kernel(float* gate, const float* up, int64_t count) {
  pdl_start();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) gate[i] = silu_mul_value(gate[i], up[i]);
}

__global__ void add_bias_kernel(float* x, const float* bias, int64_t rows, int64_t n,
                                int64_t stride) {
  pdl_start();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * n) {
    const int64_t r = i / n, c = i % n;
    x[r * stride + c] = __fadd_rn(x[r * stride + c], bias[c]);
  }
}

__global__ void rope_table_kernel(const int32_t* positions, int64_t n_tokens, int32_t n_rot,
                                  float freq_base, float freq_scale, const float* factors,
                                  float attn_factor, float2* cos_sin) {
  pdl_start();
  const int32_t half = n_rot / 2;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n_tokens * half) return;
  const int64_t t = k / half;
  const int32_t i = static_cast<int32_t>(k % half);
  cos_sin[k] = rope_cos_sin(positions[t], i, n_rot, freq_base, freq_scale,
                            factors ? factors[i] : 1.0f, attn_factor);
}

// gelu_tanh(g) * u in double, one rounding at the end (backend/cpu/ops.cpp).
__host__ __device__ __forceinline__ float gelu_tanh_mul_value(float gate, float up) {
  const double g = gate;
  return static_cast<float>(0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) *
                            up);
}

__global__ void gelu_tanh_mul_kernel(float* gate, const float* up, int64_t count) {
  pdl_start();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) gate[i] = gelu_tanh_mul_value(gate[i], up[i]);
}

// up / (1 + exp(-gate)) (backend/cpu/ops.cpp's glu(kSigmoid)). The device's
// exp in double, rounded once: the correctly rounded float, which the host's
// expf (used on the host, as the CPU does) differs from by an ulp at times.
__host__ __device__ __forceinline__ float sigmoid_mul_value(float gate, float up) {
#ifdef __CUDA_ARCH__
  const float e = static_cast<float>(exp(-static_cast<double>(gate)));
#else
  const float e = std::exp(-gate);
#endif
  return up / PAGELLM_ADD_RN(1.0f, e);  // IEEE division (no fast math)
}

__global__ void sigmoid_mul_kernel(float* gate, const float* up, int64_t count) {
  pdl_start();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) gate[i] = sigmoid_mul_value(gate[i], up[i]);
}

// gpt-oss's clamped SwiGLU (backend/cpu/ops.cpp's glu(kSwigluClamped)):
// g = min(gate, 7), u = clamp(up, -7, 7), g * sigmoid(1.702 g) * (u + 1).
// The comparisons are std::min / std::clamp's (a NaN gate stays NaN); exp as
// sigmoid_mul_value's (the device's in double, the host's expf).
__host__ __device__ __forceinline__ float swiglu_clamped_mul_value(float gate, float up) {
  constexpr float kLimit = 7.0f, kAlpha = 1.702f;
  const float g = kLimit < gate ? kLimit : gate;
  const float u = up < -kLimit ? -kLimit : (kLimit < up ? kLimit : up);
  const float a = -PAGELLM_MUL_RN(kAlpha, g);
#ifdef __CUDA_ARCH__
  const float e = static_cast<float>(exp(static_cast<double>(a)));
#else
  const float e = std::exp(a);
#endif
  return PAGELLM_MUL_RN(g / PAGELLM_ADD_RN(1.0f, e), PAGELLM_ADD_RN(u, 1.0f));
}

__global__ void swiglu_clamped_mul_kernel(float* gate, const float* up, int64_t count) {
  pdl_start();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) gate[i] = swiglu_clamped_mul_value(gate[i], up[i]);
}

// Thread k rotates pair k % half of head (k / half) % n_heads of token
// (k / half) / n_heads.
__global__ void rope_apply_kernel(float* x, int64_t stride, int32_t n_heads, int64_t n_tokens,
                                  int32_t head_dim, int32_t n_rot, bool neox,
                                  const float2* cos_sin) {
  pdl_start();
  const int32_t half = n_rot / 2;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n_tokens * n_heads * half) return;
  const int32_t i = static_cast<int32_t>(k % half);
  const int64_t th = k / half;
  const int32_t h = static_cast<int32_t>(th % n_heads);
  const int64_t t = th / n_heads;
  rope_rotate(x + t * stride + static_cast<int64_t>(h) * head_dim, i, half, neox,
              cos_sin[t * half + i]);
}

constexpr int kThreads = 256;

}  // namespace

void embedding_gather(const CudaDevice& dev, DType type, const void* table, int64_t n_vocab,
                      int64_t n_embd, const int32_t* tokens, int64_t n_tokens, float* out) {
  if (n_embd % kUnit != 0)
    throw ConfigError(fmt::format("CUDA embedding: row length {} is not a multiple of 32", n_embd));
  if (cuda_supports_weight_type(type)) {
    validate_weight_shape(type, n_vocab, n_embd);  // whole blocks (256 for the K types)
    validate_weight_pointer(type, table);
  }
  if (n_tokens == 0) return;
  dev.make_current();
  const size_t row_bytes = dtype_row_bytes(type, n_embd);
  const int64_t quads = n_embd / kQuad;
  const bool ok = dispatch_weight_type(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    launch_pdl(dev, "embedding_gather", embedding_kernel<T>, dim3(n_tokens), dim3(128), 0,
               static_cast<const uint8_t*>(table), row_bytes, n_vocab, quads, tokens, out);
  });
  if (!ok)
    throw ConfigError(
        fmt::format("CUDA embedding: token_embd type {} is not supported", dtype_name(type)));
}

void rms_norm(const CudaDevice& dev, const float* x, const float* weight, float* out, int64_t rows,
              int64_t n, float eps) {
  if (rows == 0) return;
  dev.make_current();
  launch_pdl(dev, "rms_norm", rms_norm_kernel, dim3(rows), dim3(kRmsThreads), 0, x, weight, out, n,
             eps);
}

void add_inplace(const CudaDevice& dev, float* x, const float* y, int64_t count) {
  if (count == 0) return;
  dev.make_current();
  launch_pdl(dev, "add_inplace", add_kernel, dim3(grid_for(count, kThreads)), dim3(kThreads), 0, x,
             y, count);
}

void silu_mul(const CudaDevice& dev, float* gate, const float* up, int64_t count) {
  if (count == 0) return;
  dev.make_current();
  launch_pdl(dev, "silu_mul", silu_mul_kernel, dim3(grid_for(count, kThreads)), dim3(kThreads), 0,
             gate, up, count);
}

void gelu_tanh_mul(const CudaDevice& dev, float* gate, const float* up, int64_t count) {
  if (count == 0) return;
  dev.make_current();
  launch_pdl(dev, "gelu_tanh_mul", gelu_tanh_mul_kernel, dim3(grid_for(count, kThreads)),
             dim3(kThreads), 0, gate, up, count);
}

void gelu_tanh_mul_host(float* gate, const float* up, int64_t count) {
  for (int64_t i = 0; i < count; ++i) gate[i] = gelu_tanh_mul_value(gate[i], up[i]);
}

void sigmoid_mul(const CudaDevice& dev, float* gate, const float* up, int64_t count) {
  if (count == 0) return;
  dev.make_current();
  launch_pdl(dev, "sigmoid_mul", sigmoid_mul_kernel, dim3(grid_for(count, kThreads)),
             dim3(kThreads), 0, gate, up, count);
}

void sigmoid_mul_host(float* gate, const float* up, int64_t count) {
  for (int64_t i = 0; i < count; ++i) gate[i] = sigmoid_mul_value(gate[i], up[i]);
}

void swiglu_clamped_mul(const CudaDevice& dev, float* gate, const float* up, int64_t count) {
  if (count == 0) return;
  dev.make_current();
  launch_pdl(dev, "swiglu_clamped_mul", swiglu_clamped_mul_kernel, dim3(grid_for(count, kThreads)),
             dim3(kThreads), 0, gate, up, count);
}

void swiglu_clamped_mul_host(float* gate, const float* up, int64_t count) {
  for (int64_t i = 0; i < count; ++i) gate[i] = swiglu_clamped_mul_value(gate[i], up[i]);
}

void add_bias(const CudaDevice& dev, float* x, const float* bias, int64_t rows, int64_t n,
              int64_t stride) {
  if (rows * n == 0) return;
  dev.make_current();
  launch_pdl(dev, "add_bias", add_bias_kernel, dim3(grid_for(rows * n, kThreads)), dim3(kThreads),
             0, x, bias, rows, n, stride);
}

float rms_scale_host(const float* xr, int64_t n, float eps) {
  double warps[kRmsThreads / 32];
  for (int w = 0; w < kRmsThreads / 32; ++w) {
    double lanes[32];
    for (int l = 0; l < 32; ++l) {
      double ss = 0;
      for (int64_t i = 32 * w + l; i < n; i += kRmsThreads)
        ss += static_cast<double>(xr[i]) * xr[i];
      lanes[l] = ss;
    }
    warps[w] = warp_sum_host(lanes);
  }
  double total = 0;
  for (double w : warps) total += w;
  return static_cast<float>(1.0 / std::sqrt(total / static_cast<double>(n) + eps));
}

void rms_norm_host(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                   float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = rms_scale_host(x + r * n, n, eps);
    for (int64_t i = 0; i < n; ++i)
      out[r * n + i] = weight ? x[r * n + i] * scale * weight[i] : x[r * n + i] * scale;
  }
}

std::vector<float> rope_table_host(const int32_t* positions, int64_t n_tokens, int32_t n_rot,
                                   float freq_base, float freq_scale, const float* factors,
                                   float attn_factor) {
  const int32_t half = n_rot / 2;
  std::vector<float> table(static_cast<size_t>(n_tokens * half) * 2);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int32_t i = 0; i < half; ++i) {
      const float2 cs = rope_cos_sin(positions[t], i, n_rot, freq_base, freq_scale,
                                     factors ? factors[i] : 1.0f, attn_factor);
      table[static_cast<size_t>(t * half + i) * 2] = cs.x;
      table[static_cast<size_t>(t * half + i) * 2 + 1] = cs.y;
    }
  return table;
}

void rope_host(float* x, const int32_t* positions, int64_t n_tokens, int64_t stride,
               int32_t n_heads, int32_t head_dim, int32_t n_rot, float freq_base, float freq_scale,
               RopeStyle style, const float* factors, float attn_factor) {
  if (n_rot > head_dim || n_rot % 2 != 0)
    throw ConfigError(fmt::format("CUDA RoPE: n_rot {} for heads of {}", n_rot, head_dim));
  const int32_t half = n_rot / 2;
  // The table prepare() fills, then the pairs as rope_apply_kernel rotates them.
  const std::vector<float> table =
      rope_table_host(positions, n_tokens, n_rot, freq_base, freq_scale, factors, attn_factor);
  const auto* cs = reinterpret_cast<const float2*>(table.data());
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int32_t i = 0; i < half; ++i)
      for (int32_t h = 0; h < n_heads; ++h)
        rope_rotate(x + t * stride + static_cast<int64_t>(h) * head_dim, i, half,
                    style == RopeStyle::kNeox, cs[t * half + i]);
}

void CudaRopeCache::prepare(const CudaDevice& dev, const int32_t* positions, int64_t n_tokens) {
  n_tokens_ = n_tokens;
  const int64_t pairs = n_tokens * (n_rot_ / 2);
  if (pairs == 0) return;
  cos_sin_.reserve(dev, checked_bytes(pairs, sizeof(float2)));
  if (!factors_.empty() && !d_factors_.data()) {
    d_factors_.reserve(dev, factors_.size() * sizeof(float));
    dev.to_device(d_factors_.data(), factors_.data(), factors_.size() * sizeof(float));
  }
  dev.make_current();
  launch_pdl(dev, "rope_table", rope_table_kernel, dim3(grid_for(pairs, kThreads)), dim3(kThreads),
             0, positions, n_tokens, n_rot_, freq_base_, freq_scale_,
             factors_.empty() ? nullptr : d_factors_.as<const float>(), attn_factor_,
             cos_sin_.as<float2>());
}

const float* CudaRopeCache::cos_sin(int64_t n_tokens) const {
  if (n_tokens > n_tokens_)
    throw Error(fmt::format("CUDA RoPE: {} tokens, but prepare() saw {}", n_tokens, n_tokens_));
  return cos_sin_.as<const float>();
}

void CudaRopeCache::apply(const CudaDevice& dev, float* x, int64_t n_tokens, int64_t stride,
                          int32_t n_heads, int32_t head_dim, RopeStyle style) const {
  const float2* table = reinterpret_cast<const float2*>(cos_sin(n_tokens));
  if (n_rot_ > head_dim || n_rot_ % 2 != 0)
    throw ConfigError(fmt::format("CUDA RoPE: n_rot {} for heads of {}", n_rot_, head_dim));
  const int64_t work = n_tokens * n_heads * (n_rot_ / 2);
  if (work == 0) return;
  dev.make_current();
  launch_pdl(dev, "rope_apply", rope_apply_kernel, dim3(grid_for(work, kThreads)), dim3(kThreads),
             0, x, stride, n_heads, n_tokens, head_dim, n_rot_, style == RopeStyle::kNeox, table);
}

}  // namespace pagellm::cuda
