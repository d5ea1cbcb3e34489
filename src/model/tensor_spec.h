// One entry of an architecture's tensor table: which GGUF tensor fills which
// role of a layer, its shape, and whether it may be absent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagellm {

// The matrices a layer may have (LayerWeights::matrix). A mixture-of-experts
// FFN has a router (ffn_gate_inp: one row per expert) and stacks of expert
// matrices (3-D tensors, WeightMatrix::n_expert > 1).
enum class MatrixRole : uint8_t {
  kQ,
  kK,
  kV,
  kOut,
  kGate,
  kUp,
  kDown,
  kRouter,
  kGateExps,
  kUpExps,
  kDownExps,
  // Gated delta-net layers (model/delta_net_block.h).
  kSsmIn,     // attn_qkv: rows q, k, v of the conv's channels
  kSsmZ,      // attn_gate: the output gate
  kSsmBeta,   // ssm_beta
  kSsmAlpha,  // ssm_alpha
  kSsmOut,    // ssm_out
  // A gated shared expert beside the routed ones (qwen35moe): its gated FFN
  // and the [n_embd] row whose product with x' gives the token's gate logit.
  kGateShexp,
  kUpShexp,
  kDownShexp,
  kShexpGate,  // ffn_gate_inp_shexp: a 1-D tensor, read as a one-row matrix
  // Per-layer inputs (Gemma 4): a layer's gate (inp_gate) and projection back
  // (proj); the model's per-token table and projection of the embeddings
  // (Architecture::model_tensors).
  kPleGate,
  kPleProj,
  kPerLayerTokenEmbd,
  kPerLayerModelProj,
  // Multi-head latent attention (model/mla_block.h).
  kQA,   // attn_q_a: x' to the q latent (q LoRA)
  kQB,   // attn_q_b: the normed q latent to the heads' q
  kKvA,  // attn_kv_a_mqa: x' to [kv latent | shared k_pe]
  kKB,   // attn_k_b: per head, q_nope to the latent (a stack of heads)
  kVB,   // attn_v_b: per head, the latent to the head's values (a stack of heads)
  kCount
};
// Its 1-D tensors (LayerWeights::vector).
enum class VectorRole : uint8_t {
  kAttnNorm,
  kQBias,
  kKBias,
  kVBias,
  kQNorm,
  kKNorm,
  kAttnPostNorm,
  kFfnNorm,
  kFfnPostNorm,
  kSsmConv,    // ssm_conv1d [channels][kernel]
  kSsmDtBias,  // ssm_dt.bias
  kSsmA,       // ssm_a (-exp(A_log))
  kSsmNorm,    // ssm_norm [d_v]
  // Per-layer inputs (Gemma 4): the layer's post_norm and its output scale
  // ([1]); the model's per_layer_proj_norm and rope_freqs.
  kPleNorm,
  kLayerOutScale,
  kPerLayerProjNorm,
  kRopeFreqs,
  kQANorm,     // attn_q_a_norm (MLA)
  kKvANorm,    // attn_kv_a_norm (MLA)
  kExpProbsB,  // exp_probs_b.bias: the router's selection bias (deepseek2 V3)
  // gpt-oss: attn_output.bias, attn_sinks (one logit per q head), the
  // router's bias (ffn_gate_inp.bias, added to its logits) and the experts'
  // biases ([n_out][n_expert]: expert e's at e * n_out).
  kOutBias,
  kAttnSinks,
  kRouterBias,
  kGateExpsBias,
  kUpExpsBias,
  kDownExpsBias,
  kCount
};
// The vectors that go with the expert stacks (kept where the experts run).
constexpr bool is_expert_vector(VectorRole r) {
  return r == VectorRole::kGateExpsBias || r == VectorRole::kUpExpsBias ||
         r == VectorRole::kDownExpsBias;
}
constexpr size_t kMatrixRoles = static_cast<size_t>(MatrixRole::kCount);
constexpr size_t kVectorRoles = static_cast<size_t>(VectorRole::kCount);

struct TensorSpec {
  bool matrix = true;
  uint8_t role = 0;  // a MatrixRole or VectorRole
  std::string name;  // full GGUF name, "blk.3.attn_q.weight"
  int64_t n_in = 0;  // matrix: ne = [n_in, n_out]; vector: n_in elements
  int64_t n_out = 0;
  bool optional = false;
  // A part of a fused matrix (Phi-3's attn_qkv, ffn_up = gate|up): rows
  // [row0, row0 + n_out) of a tensor of fused_rows rows (0: not fused).
  int64_t row0 = 0;
  int64_t fused_rows = 0;
  // A stack of experts: ne = [n_in, n_out, n_expert] (0: a 2-D matrix).
  int64_t n_expert = 0;
  // A stack of per-head matrices, ne = [n_in, n_out, n_heads], loaded as one
  // matrix of n_out * n_heads rows (every token reads all of them, unlike
  // experts); 0: not one. WeightMatrix::rows() takes a head's part.
  int64_t n_heads = 0;

  static TensorSpec mat(MatrixRole r, std::string name, int64_t n_in, int64_t n_out) {
    return {true, static_cast<uint8_t>(r), std::move(name), n_in, n_out, false, 0, 0, 0};
  }
  static TensorSpec experts(MatrixRole r, std::string name, int64_t n_in, int64_t n_out,
                            int64_t n_expert) {
    return {true, static_cast<uint8_t>(r), std::move(name), n_in, n_out, false, 0, 0, n_expert};
  }
  static TensorSpec heads(MatrixRole r, std::string name, int64_t n_in, int64_t n_out,
                          int64_t n_heads) {
    return {true, static_cast<uint8_t>(r), std::move(name), n_in, n_out, false, 0, 0, 0, n_heads};
  }
  static TensorSpec vec(VectorRole r, std::string name, int64_t n, bool optional = false) {
    return {false, static_cast<uint8_t>(r), std::move(name), n, 0, optional, 0, 0, 0};
  }
  // A small 2-D tensor read as floats (ne = [n_in, n_out], n_in * n_out values).
  static TensorSpec vec2(VectorRole r, std::string name, int64_t n_in, int64_t n_out) {
    return {false, static_cast<uint8_t>(r), std::move(name), n_in, n_out, false, 0, 0, 0};
  }
  static TensorSpec part(MatrixRole r, std::string name, int64_t n_in, int64_t row0, int64_t rows,
                         int64_t fused_rows) {
    return {true, static_cast<uint8_t>(r), std::move(name), n_in, rows, false, row0, fused_rows, 0};
  }
};

using TensorList = std::vector<TensorSpec>;

}  // namespace pagellm
