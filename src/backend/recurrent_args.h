// The arguments of the recurrent-state ops of gated delta-net layers (Qwen3.5,
// Qwen3-Next): Backend::ssm_conv and Backend::gated_delta_rule, shared by
// every backend's kernels. Pointers are in the memory of the backend that
// runs the op, except RecurrentBatch, which is host memory (a backend copies
// it where its kernels need it).
//
// Batch: the call's rows (tokens) are grouped by sequence; sequence s owns rows
// [token_begin[s], token_begin[s + 1]) in position order, and its state is slot
// state_slot[s] of the state pool (`states` + slot * state_stride floats).
// A sequence's tokens may come in runs of any length, split any way over
// calls: the state carries what the next run needs. Each sequence's result
// depends only on its own rows and state (never on the other sequences in the
// call, their count or order, or the thread count): bit for bit.
// (No other includes: CUDA kernels take the structs by value.)
#pragma once

#include <cstdint>

namespace pagellm {

struct RecurrentBatch {
  int32_t n_seqs = 0;
  const int32_t* token_begin = nullptr;  // [n_seqs + 1], token_begin[0] = 0
  const int32_t* state_slot = nullptr;   // [n_seqs]
  // Tokens of sequence s already folded into its state (the position of its
  // first row in this call). gated_delta_rule aligns its chunks to it.
  const int32_t* first_pos = nullptr;  // [n_seqs]
  // Positions from which sequence s's tokens each take the one-token step
  // (decode), however many come in one call; null: none (chunking only).
  const int32_t* step_from = nullptr;  // [n_seqs]
  int32_t n_tokens() const { return token_begin[n_seqs]; }
};

// Causal depthwise 1-D convolution over `channels` channels with `kernel`
// taps (Mamba / delta-net short conv, llama.cpp ssm_conv):
//   y[t][c] = act(bias[c] + sum_{k < kernel} weight[c][k] * x[t - kernel + 1 + k][c])
// where rows before the run's first come from the sequence's state, the
// oldest tap first. Summed as fused multiply-adds in k order from bias[c]
// (or 0), then act = SiLU (x / (1 + exp(-x))) when `silu`.
// Layouts:
//   x        [n_tokens] rows of `channels` floats, x_stride apart (read only)
//   y        [n_tokens] rows, y_stride apart; must not overlap x
//   weight   [channels][kernel] (the GGUF ssm_conv1d tensor)
//   bias     [channels] or nullptr
//   states   slot s at states + s * state_stride: [kernel - 1][channels], the
//            sequence's last kernel - 1 inputs, oldest first (zeros for a new
//            sequence); updated in place to the last kernel - 1 inputs after
//            the run (so runs of any length, 1 included, chain exactly).
struct SsmConvArgs {
  const float* x = nullptr;
  int64_t x_stride = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* states = nullptr;
  int64_t state_stride = 0;  // floats per slot, >= (kernel - 1) * channels
  int32_t channels = 0;
  int32_t kernel = 4;
  bool silu = true;
};

// The gated delta rule with its input transforms, per sequence and value
// head h (key head kh = h % n_k_heads: Qwen3.5's tiled head map):
//   qn = q[kh] / sqrt(sum q[kh]^2 + eps) * q_scale,  kn = k[kh] / sqrt(sum k[kh]^2 + eps)
//   g = softplus(alpha[h] + dt_bias[h]) * a[h]  (a = ssm_a = -exp(A_log) <= 0)
//   beta = sigmoid(b[h])
// then, with the state S [d_k][d_v] of the head, per token in order:
//   S = exp(g) S                       (decay first)
//   S += kn (beta (v - S^T kn))^T      (delta rule: k both reads and writes)
//   o = S^T qn                         (read after the update)
// Layouts:
//   q, k, v   row t at q + t * qkv_stride (also k, v): q and k hold
//             [n_k_heads][d_k], v [n_v_heads][d_v] (read only; the conv's
//             output rows [q | k | v] give q, k = q + n_k_heads d_k, v = ...)
//   alpha, b  row t at alpha + t * gate_stride: [n_v_heads] (raw projections)
//   dt_bias, a  [n_v_heads]
//   states    slot s at states + s * state_stride: [n_v_heads][d_k][d_v] f32
//             (S[i][j] at i * d_v + j; zeros for a new sequence), updated in place
//   out       [n_tokens][n_v_heads][d_v], row stride out_stride
// How it is computed (backend/cpu/delta_rule.h for the exact operation order):
// a sequence's run is cut at the absolute positions that are multiples of
// kGatedDeltaChunk (from first_pos); a piece of one token takes the recurrent
// step above, a longer piece the chunked (WY) form, which sums in another
// order. So a sequence's outputs and state are the same bits whenever its
// runs are cut at multiples of kGatedDeltaChunk (and single tokens after
// the prompt: decode), whatever the batch; other cuts agree to float
// rounding (the chunked form and the step differ by ~1e-6 relative).
constexpr int32_t kGatedDeltaChunk = 64;

struct GatedDeltaArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t qkv_stride = 0;
  const float* alpha = nullptr;
  const float* b = nullptr;
  int64_t gate_stride = 0;
  const float* dt_bias = nullptr;
  const float* a = nullptr;
  float* states = nullptr;
  int64_t state_stride = 0;  // floats per slot, >= n_v_heads * d_k * d_v
  float* out = nullptr;
  int64_t out_stride = 0;
  int32_t n_k_heads = 0;
  int32_t n_v_heads = 0;  // a multiple of n_k_heads
  int32_t d_k = 0;
  int32_t d_v = 0;
  float eps = 1e-6f;     // the L2 norm's (llama.cpp: the model's rms eps)
  float q_scale = 1.0f;  // 1 / sqrt(d_k) for Qwen3.5
};

}  // namespace pagellm
