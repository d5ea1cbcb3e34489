// The shared pieces that architectures build their layers from: an attention
// block and a gated feed-forward block, each with the options the supported
// families differ by, and the tensor table entries those options imply (one
// description for loading and for running, so they cannot disagree).
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "backend/recurrent_args.h"
#include "gguf/gguf_reader.h"
#include "model/architecture.h"
#include "model/batch.h"
#include "model/hparams.h"
#include "model/moe_routing.h"
#include "model/tensor_spec.h"
#include "model/weights.h"

namespace pagellm {

// One layer of one step, on its device: the layer's weights, its KV cache
// view (window and soft cap already set) and the segment's activation
// buffers ([T][n] f32 each, in the backend's memory).
struct LayerContext {
  Backend& b;
  const ModelHParams& hp;
  const LayerWeights& w;
  int32_t layer;
  KvLayerView cache;
  int64_t T;          // the step's tokens
  float* x;           // [T][n_embd] residual stream, updated in place
  float* h;           // [T][n_embd] scratch
  float* q;           // [T][n_embd_q]
  float* k;           // [T][n_embd_kv]
  float* v;           // [T][n_embd_kv]
  float* attn;        // [T][n_embd_q]
  float* gate;        // [T][n_ff] (MoE: [T * n_expert_used][n_ff_exp])
  float* up;          // [T][n_ff] (MoE: [T * n_expert_used][n_ff_exp])
  // Mixture-of-experts layers: the router's logits [T][n_expert], the
  // tokens' normed rows grouped by expert and the experts' outputs
  // ([T * n_expert_used][n_embd] each), and the routing (host memory).
  float* router = nullptr;  // ([T][n_expert + 1] with a shared expert: its gate logits last)
  float* moe_x = nullptr;
  float* moe_y = nullptr;
  MoeRouting* routing = nullptr;
  // A shared expert (FfnOptions::shared_expert): its gate and up rows
  // ([T][n_ff_shexp] each), then its output ([T][n_embd]), in the layer's memory.
  float* shexp = nullptr;
  // Experts on another backend than the layer's (the host): non-null, and
  // gate/up/moe_x/moe_y are in its memory; expert_rows ([T][n_embd] there)
  // takes the normed rows over and the combined output back.
  Backend* expert_b = nullptr;
  float* expert_rows = nullptr;
  // Scratch of [T][workspace_extra_floats(hp)] floats: the gated attention's
  // q|gate rows, the delta-net block's projections.
  float* extra = nullptr;
  // Gated delta-net layers: the step's sequences (host memory) and this
  // layer's states (slot s at conv_states + s * conv_stride, likewise delta).
  const RecurrentBatch* recurrent = nullptr;
  float* conv_states = nullptr;
  int64_t conv_stride = 0;
  float* delta_states = nullptr;
  int64_t delta_stride = 0;
  // Per-layer inputs (hp.n_embd_per_layer > 0): this layer's [T][P] rows, in
  // the layer's memory (model/per_layer_inputs.h).
  const float* layer_input = nullptr;
  // MLA layers (model/mla_block.h): the step's batch (host memory: positions,
  // sequences, each sequence's prompt end) and the plain form's scratch of
  // mla_plain_floats() (null: the absorbed form for every token).
  const Batch* batch = nullptr;
  float* mla_plain = nullptr;
};

// Floats per token of LayerContext::extra the model's layers need.
int64_t workspace_extra_floats(const ModelHParams& hp);

// Where q/k RMSNorms sit (their weights: [head_dim] per head, or the whole
// projection's [n_head * head_dim]).
enum class QkNorm { kNone, kPerHead, kWhole };

struct AttentionOptions {
  bool pre_norm = true;    // attn_norm.weight before the projections
  bool bias = false;       // q/k/v biases (qwen2)
  QkNorm qk_norm = QkNorm::kNone;
  bool post_norm = false;  // RMSNorm of the block's output before the residual add
  // Names of the post-norm ("post_attention_norm").
  const char* post_norm_name = "post_attention_norm";
  bool fused_qkv = false;  // one attn_qkv.weight: rows q, then k, then v (phi3)
  bool v_norm = false;     // an RMSNorm without weight of each v head (Gemma 4)
  bool out_bias = false;   // attn_output.bias (gpt-oss)
  // attn_sinks.weight: a logit per q head in the softmax's max and sum, no
  // value (gpt-oss; backend/attention_args.h).
  bool sinks = false;
};

struct FfnOptions {
  bool pre_norm = true;    // ffn_norm.weight (or pre_norm_name)
  const char* pre_norm_name = "ffn_norm";
  bool post_norm = false;  // RMSNorm of the block's output before the residual add
  const char* post_norm_name = "post_ffw_norm";
  bool fused_gate_up = false;  // ffn_up.weight holds gate rows, then up rows (phi3)
  // Models with experts (hp.moe()): how the router weighs them.
  RouterOptions router = {};
  // Models with experts: a shared expert beside the routed ones (qwen35moe),
  // a gated FFN of hp.n_ff_shexp on every token whose output is weighed by
  // sigmoid(x' . ffn_gate_inp_shexp) and added to the routed experts' sum.
  bool shared_expert = false;
  // The shared expert's output weighed by sigmoid(x' . ffn_gate_inp_shexp);
  // false: added as it is (deepseek2, whose shared experts have no gate).
  bool shared_expert_gate = true;
  // Biases of the router's logits (ffn_gate_inp.bias) and of each expert's
  // gate, up and down products (ffn_*_exps.bias, 2-D) (gpt-oss).
  bool expert_bias = false;
};

// A sliding-window key: 0 when absent or 0 (no window); FormatError naming
// the key when it is larger than any context (over 2^30).
int32_t window_key(const GgufFile& f, const std::string& key);

// Family rules shared by several families.
// Layer l gets a sliding window of `window` positions unless it is the last of
// each `pattern` layers (l % pattern == pattern - 1); window 0: none.
void set_window_pattern(ModelHParams& hp, int32_t window, int32_t pattern);
// The Gemma block's common settings: embeddings times sqrt(n_embd), GELU,
// NeoX RoPE, and the attention scale of the reference (1 / sqrt(head_dim),
// 1 / sqrt(n_embd / n_head) for the 27B models, which have `layers_27b`).
void set_gemma_common(ModelHParams& hp, int32_t layers_27b);
// The positive float key `key` of the file, or `fallback` when absent.
float positive_f32_key(const GgufFile& f, const std::string& key, float fallback);

void attention_tensors(const ModelHParams& hp, int32_t layer, const AttentionOptions& o,
                       TensorList& out);
void ffn_tensors(const ModelHParams& hp, int32_t layer, const FfnOptions& o, TensorList& out);

// x += attention(x): norm, q/k/v (+bias), q/k norms, RoPE (the layer's table;
// none on a NoPE layer), K/V into the cache, paged attention (the layer's
// window, the model's scale and soft cap), output projection, post-norm.
// Shapes are the layer's (LayerSpec); a layer that shares KV (kv_source)
// has no k/v of its own: q only, attending to c.cache (its source's).
void attention_block(LayerContext& c, const AttentionOptions& o);

// Per-layer inputs (Gemma 4), after the FFN: x += post_norm(proj(gelu(
// inp_gate(x)) * c.layer_input)); then x *= the layer's output_scale.
void per_layer_input_tensors(const ModelHParams& hp, int32_t layer, TensorList& out);
void per_layer_input_block(LayerContext& c);
// x += down(act(gate(x')) * up(x')), x' the normed x; post-norm. With
// experts (hp.moe()): x += sum over the token's routed experts e of
// weight_e * down_e(act(gate_e(x')) * up_e(x')), the step's tokens grouped by
// expert so that each expert's matrices are read once per step; a shared
// expert adds sigmoid(x' . g) * down_s(act(gate_s(x')) * up_s(x')) to that sum.
void ffn_block(LayerContext& c, const FfnOptions& o);

// A family whose layers are one attention block, then one FFN block: its
// tensor table and run_layer from the two options.
template <const AttentionOptions& kAttention, const FfnOptions& kFfn>
class AttentionFfnArchitecture : public Architecture {
 public:
  void layer_tensors(const ModelHParams& hp, int32_t l, TensorList& out) const override {
    attention_tensors(hp, l, kAttention, out);
    ffn_tensors(hp, l, kFfn, out);
  }
  void run_layer(LayerContext& c) const override {
    attention_block(c, kAttention);
    ffn_block(c, kFfn);
  }
};

}  // namespace pagellm
