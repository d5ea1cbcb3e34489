#include "backend/cuda/delta_net.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cuda/device_common.cuh"
#include "backend/cuda/pdl.cuh"

namespace pagellm::cuda {

using namespace detail;

namespace {

// backend/cpu/lanes.h's exp_scalar, operation for operation.
__host__ __device__ __forceinline__ float exp_lanes(float x) {
  const bool normal = x >= -87.3f;
  x = fminf(fmaxf(x, -87.3f), 88.0f);
  const float n = rintf(PAGELLM_MUL_RN(x, 1.44269504088896341f));
  float r = fma_rn(-n, 0.693359375f, x);
  r = fma_rn(-n, -2.12194440e-4f, r);
  float p = 1.0f / 720;
  p = fma_rn(p, r, 1.0f / 120);
  p = fma_rn(p, r, 1.0f / 24);
  p = fma_rn(p, r, 1.0f / 6);
  p = fma_rn(p, r, 0.5f);
  p = fma_rn(p, r, 1.0f);
  p = fma_rn(p, r, 1.0f);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float e;
  memcpy(&e, &bits, 4);
  return normal ? PAGELLM_MUL_RN(p, e) : 0.0f;
}

__host__ __device__ __forceinline__ float log1p_any(float x) {
#ifdef __CUDA_ARCH__
  return log1pf(x);
#else
  return std::log1p(x);
#endif
}

// Conv output and state of channel c of one sequence (ssm_conv.h's order).
__host__ __device__ void conv_channel(const SsmConvArgs& a, float* state, int64_t r0, int64_t r1,
                                      int c) {
  const int K = a.kernel, C = a.channels;
  auto in = [&](int64_t m) -> float {
    return m < K - 1 ? state[m * C + c] : a.x[(r0 + m - (K - 1)) * a.x_stride + c];
  };
  const int64_t n = r1 - r0;
  for (int64_t t = 0; t < n; ++t) {
    float acc = a.bias ? a.bias[c] : 0.0f;
    for (int k = 0; k < K; ++k) acc = fma_rn(a.weight[c * K + k], in(t + k), acc);
    if (a.silu)
      acc = acc / PAGELLM_ADD_RN(1.0f, exp_lanes(PAGELLM_SUB_RN(0.0f, acc)));
    a.y[(r0 + t) * a.y_stride + c] = acc;
  }
  for (int m = 0; m < K - 1; ++m) state[m * C + c] = in(n + m);  // reads ahead of the writes
}

// delta_rule.h's input transforms for row `row`, value head h.
__host__ __device__ void prepare_token(const GatedDeltaArgs& a, int64_t row, int h, float* kn,
                                       float* qn, float* g, float* beta) {
  const int kh = h % a.n_k_heads;
  const int64_t off = row * a.qkv_stride + static_cast<int64_t>(kh) * a.d_k;
  for (int which = 0; which < 2; ++which) {
    const float* x = (which == 0 ? a.q : a.k) + off;
    float* out = which == 0 ? qn : kn;
    const float scale = which == 0 ? a.q_scale : 1.0f;
    float ss = 0.0f;
    for (int i = 0; i < a.d_k; ++i) ss = fma_rn(x[i], x[i], ss);
    const float inv = 1.0f / sqrtf(PAGELLM_ADD_RN(ss, a.eps));
    for (int i = 0; i < a.d_k; ++i) out[i] = PAGELLM_MUL_RN(PAGELLM_MUL_RN(x[i], inv), scale);
  }
  const float x = PAGELLM_ADD_RN(a.alpha[row * a.gate_stride + h], a.dt_bias[h]);
  *g = PAGELLM_MUL_RN(x > 20.0f ? x : log1p_any(exp_lanes(x)), a.a[h]);
  *beta = 1.0f / PAGELLM_ADD_RN(1.0f, exp_lanes(-a.b[row * a.gate_stride + h]));
}

// The recurrent step for column j of one head's state (delta_rule.h).
__host__ __device__ void step_column(float* S, int dk, int dv, int j, const float* kn,
                                     const float* qn, float v, float g, float beta, float* o) {
  const float decay = exp_lanes(g);
  float kv = 0.0f;
  for (int i = 0; i < dk; ++i) {
    const float s = PAGELLM_MUL_RN(S[i * dv + j], decay);
    S[i * dv + j] = s;
    kv = fma_rn(kn[i], s, kv);
  }
  const float d = PAGELLM_MUL_RN(PAGELLM_SUB_RN(v, kv), beta);
  float acc = 0.0f;
  for (int i = 0; i < dk; ++i) {
    const float s = fma_rn(kn[i], d, S[i * dv + j]);
    S[i * dv + j] = s;
    acc = fma_rn(qn[i], s, acc);
  }
  *o = acc;
}

__global__ void conv_kernel(SsmConvArgs a, RecurrentBatch b) {
  pdl_start();
  const int c = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int32_t s = static_cast<int32_t>(blockIdx.y);
  if (c >= a.channels) return;
  conv_channel(a, a.states + b.state_slot[s] * a.state_stride, b.token_begin[s],
               b.token_begin[s + 1], c);
}

// Block (head, sequence), thread j < d_v; shared: kn, qn, g, beta.
__global__ void delta_kernel(GatedDeltaArgs a, RecurrentBatch b) {
  pdl_start();
  extern __shared__ float smem[];
  float* kn = smem;
  float* qn = smem + a.d_k;
  float* gb = smem + 2 * a.d_k;
  const int h = static_cast<int>(blockIdx.x), j = threadIdx.x;
  const int32_t s = static_cast<int32_t>(blockIdx.y);
  float* S = a.states + b.state_slot[s] * a.state_stride + static_cast<int64_t>(h) * a.d_k * a.d_v;
  for (int64_t r = b.token_begin[s]; r < b.token_begin[s + 1]; ++r) {
    __syncthreads();  // the previous token's inputs are read
    if (j == 0) prepare_token(a, r, h, kn, qn, &gb[0], &gb[1]);
    __syncthreads();
    if (j < a.d_v)
      step_column(S, a.d_k, a.d_v, j, kn, qn, a.v[r * a.qkv_stride + h * a.d_v + j], gb[0], gb[1],
                  &a.out[r * a.out_stride + h * a.d_v + j]);
  }
}

constexpr int kConvThreads = 128;

}  // namespace

void ssm_conv(const CudaDevice& dev, const SsmConvArgs& args, const RecurrentBatch& batch) {
  if (batch.n_seqs == 0) return;
  dev.make_current();
  launch_pdl(dev, "ssm_conv", conv_kernel,
             dim3(grid_for(args.channels, kConvThreads), static_cast<unsigned>(batch.n_seqs)),
             dim3(kConvThreads), 0, args, batch);
}

void gated_delta_rule(const CudaDevice& dev, const GatedDeltaArgs& args,
                      const RecurrentBatch& batch) {
  if (batch.n_seqs == 0) return;
  dev.make_current();
  const unsigned threads = static_cast<unsigned>((args.d_v + 31) / 32 * 32);
  const size_t smem = (2 * static_cast<size_t>(args.d_k) + 2) * sizeof(float);
  launch_pdl(dev, "gated_delta_rule", delta_kernel,
             dim3(static_cast<unsigned>(args.n_v_heads), static_cast<unsigned>(batch.n_seqs)),
             dim3(threads), smem, args, batch);
}

void ssm_conv_host(const SsmConvArgs& args, const RecurrentBatch& batch) {
  for (int32_t s = 0; s < batch.n_seqs; ++s)
    for (int c = 0; c < args.channels; ++c)
      conv_channel(args, args.states + batch.state_slot[s] * args.state_stride,
                   batch.token_begin[s], batch.token_begin[s + 1], c);
}

void gated_delta_rule_host(const GatedDeltaArgs& a, const RecurrentBatch& batch) {
  std::vector<float> kn(static_cast<size_t>(a.d_k)), qn(kn.size());
  for (int32_t s = 0; s < batch.n_seqs; ++s)
    for (int h = 0; h < a.n_v_heads; ++h) {
      float* S = a.states + batch.state_slot[s] * a.state_stride +
                 static_cast<int64_t>(h) * a.d_k * a.d_v;
      for (int64_t r = batch.token_begin[s]; r < batch.token_begin[s + 1]; ++r) {
        float g, beta;
        prepare_token(a, r, h, kn.data(), qn.data(), &g, &beta);
        for (int j = 0; j < a.d_v; ++j)
          step_column(S, a.d_k, a.d_v, j, kn.data(), qn.data(),
                      a.v[r * a.qkv_stride + h * a.d_v + j], g, beta,
                      &a.out[r * a.out_stride + h * a.d_v + j]);
      }
    }
}

}  // namespace pagellm::cuda
