// Element-wise and row-wise CUDA kernels of the transformer block: the
// counterparts of backend/cpu/ops.h, with the same math. All pointers are
// device pointers; every call is queued on dev.stream() and returns without
// waiting. Tensors are row-major f32: `rows` rows of `n` floats, row stride n
// unless given.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/rope_style.h"
#include "tensor/dtype.h"

namespace pagellm::cuda {

// out[t][0..n_embd) = row tokens[t] of `table` as f32.
//   table   [n_vocab][n_embd] of any weight type of gemv.h (GGUF rows, n_embd
//           a multiple of the block size)
//   tokens  [n_tokens] int32; ids outside [0, n_vocab) give rows of zeros
//           (callers check ids on the host first, as the CPU path does)
//   out     [n_tokens][n_embd] f32
// Throws ConfigError for another type or an n_embd that is not a multiple of 32.
void embedding_gather(const CudaDevice& dev, DType type, const void* table, int64_t n_vocab,
                      int64_t n_embd, const int32_t* tokens, int64_t n_tokens, float* out);

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight (sum of squares in double,
// as the CPU); out may alias x; a null weight: no weight (Gemma 4's v norm).
void rms_norm(const CudaDevice& dev, const float* x, const float* weight, float* out, int64_t rows,
              int64_t n, float eps);

// rms_norm's row scale 1 / sqrt(mean(x^2) + eps) and the whole kernel, on the
// host (host memory), with its block's reduction order spelled out: tests
// check it without a GPU. (The kernel's scale is the same bits.)
float rms_scale_host(const float* xr, int64_t n, float eps);
void rms_norm_host(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                   float eps);

// x[i] += y[i]
void add_inplace(const CudaDevice& dev, float* x, const float* y, int64_t count);

// gate[i] = silu(gate[i]) * up[i], silu(v) = v / (1 + exp(-v))
void silu_mul(const CudaDevice& dev, float* gate, const float* up, int64_t count);
// gate[i] = gelu_tanh(gate[i]) * up[i], in double as the CPU's gelu_tanh_mul.
void gelu_tanh_mul(const CudaDevice& dev, float* gate, const float* up, int64_t count);
void gelu_tanh_mul_host(float* gate, const float* up, int64_t count);
// gate[i] = up[i] / (1 + exp(-gate[i])): glu(Activation::kSigmoid), the gated
// attention output. The device's exp is the correctly rounded float (in
// double); the host's expf, which the CPU and the host rendition use, is an
// ulp off for ~0.06% of inputs; then float add and divide as the CPU.
void sigmoid_mul(const CudaDevice& dev, float* gate, const float* up, int64_t count);
void sigmoid_mul_host(float* gate, const float* up, int64_t count);
// glu(Activation::kSwigluClamped), gpt-oss: g = min(gate, 7), u = clamp(up,
// -7, 7), gate[i] = g * sigmoid(1.702 g) * (u + 1); exp as sigmoid_mul's.
void swiglu_clamped_mul(const CudaDevice& dev, float* gate, const float* up, int64_t count);
void swiglu_clamped_mul_host(float* gate, const float* up, int64_t count);

// x[r * stride + i] += bias[i] for each of `rows` rows of n floats
void add_bias(const CudaDevice& dev, float* x, const float* bias, int64_t rows, int64_t n,
              int64_t stride);

// RoPE, as backend/cpu RopeCache: cos/sin of every (token, pair) computed once
// per step in double precision (angle = pos * freq_scale * base^(-2i / n_rot)),
// then applied to the first n_rot dims of each head.
// CudaRopeCache's prepare + apply on the host (host memory), by the kernels'
// own per-pair code: tests check the table and both pair orders without a GPU.
void rope_host(float* x, const int32_t* positions, int64_t n_tokens, int64_t stride,
               int32_t n_heads, int32_t head_dim, int32_t n_rot, float freq_base, float freq_scale,
               RopeStyle style, const float* factors = nullptr, float attn_factor = 1.0f);

// CudaRopeCache's table (rope.cuh's layout) on the host, by the kernel's own
// per-pair code: for the host renditions of kernels that read it.
std::vector<float> rope_table_host(const int32_t* positions, int64_t n_tokens, int32_t n_rot,
                                   float freq_base, float freq_scale,
                                   const float* factors = nullptr, float attn_factor = 1.0f);

class CudaRopeCache {
 public:
  // factors: host, n_rot / 2 per-pair frequency divisors (null: none).
  CudaRopeCache(int32_t n_rot, float freq_base, float freq_scale, const float* factors = nullptr,
                float attn_factor = 1.0f)
      : n_rot_(n_rot),
        freq_base_(freq_base),
        freq_scale_(freq_scale),
        attn_factor_(attn_factor),
        factors_(factors ? std::vector<float>(factors, factors + n_rot / 2) : std::vector<float>{}) {}
  // positions: device [n_tokens] int32.
  void prepare(const CudaDevice& dev, const int32_t* positions, int64_t n_tokens);
  // Rotates x [n_tokens][stride] (n_heads heads of head_dim from each row's
  // start; row t uses positions[t] of prepare()). kNorm rotates (x[2i],
  // x[2i+1]), kNeox (x[i], x[i + n_rot/2]).
  void apply(const CudaDevice& dev, float* x, int64_t n_tokens, int64_t stride, int32_t n_heads,
             int32_t head_dim, RopeStyle style) const;
  // Where the table is (it moves when a step has more tokens than before).
  const void* table() const { return cos_sin_.data(); }
  // The table (rope.cuh's layout) for a step's first n_tokens tokens, for
  // kernels that rotate as they go; throws when prepare() saw fewer.
  const float* cos_sin(int64_t n_tokens) const;
  int32_t n_rot() const { return n_rot_; }

 private:
  int32_t n_rot_;
  float freq_base_;
  float freq_scale_;
  float attn_factor_;
  std::vector<float> factors_;
  DeviceBuffer d_factors_;  // factors_ on the device, uploaded by the first prepare()
  int64_t n_tokens_ = 0;
  DeviceBuffer cos_sin_;  // [n_tokens][n_rot / 2] of {cos, sin} f32
};

}  // namespace pagellm::cuda
