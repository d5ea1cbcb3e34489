// Model hyper-parameters read from GGUF metadata ("{arch}.*" keys): the ones
// every decoder has, read here, and the family's own (norms, windows, soft
// caps, RoPE tables), set by its architecture (model/architecture.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/activation.h"
#include "backend/rope_style.h"
#include "gguf/gguf_reader.h"
#include "model/moe_routing.h"
#include "model/rope_yarn.h"

namespace pagellm {

// One RoPE table of the model (RopeParams once the weights are loaded): base,
// linear scale, the name of a tensor of frequency factors (empty: none), and
// YaRN's blend (model/rope_yarn.h: computed divisors, times the tensor's).
struct RopeTableSpec {
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  std::string factors;
  float attn_factor = 1.0f;
  int32_t n_rot = 0;  // rotated dims of this table; 0: the model's n_rot
  YarnSpec yarn;
};

// What differs between the layers of one model.
struct LayerSpec {
  int32_t window = 0;      // sliding-window attention over this many positions; 0: full
  int32_t rope_table = 0;  // index into ModelHParams::rope_tables
  bool rope = true;        // false: q and k are not rotated (NoPE layers, SmolLM3)
  // A gated delta-net layer (linear attention with a recurrent state per
  // sequence, no KV cache): Qwen3.5's recurrent layers.
  bool recurrent = false;
  // A dense FFN in a model with experts (deepseek2's leading_dense_block_count).
  bool dense_ffn = false;
  // Shapes that differ between layers (Gemma 4's sliding and full layers);
  // from_gguf sets the model's where the family leaves 0.
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  // KV sharing: attends to the cache of this earlier layer (same window and
  // KV shape) and keeps none of its own; -1: its own cache.
  int32_t kv_source = -1;
  // The hidden state is multiplied by this after the layer (Gemma 4).
  float output_scale = 1.0f;
};

// Multi-head latent attention (DeepSeek V2/V3, model/mla_block.h): K and V
// come from one latent of kv_lora_rank per token (plus n_rot shared RoPE
// dims), which is what the cache keeps; head_dim is kv_lora_rank + n_rot.
struct MlaShape {
  int32_t kv_lora_rank = 0;  // attention.kv_lora_rank; 0: not MLA
  int32_t q_lora_rank = 0;   // attention.q_lora_rank; 0: attn_q straight from x'
  int32_t qk_nope = 0;       // per head q/k dims without RoPE (key_length_mla - n_rot)
  int32_t v_head = 0;        // per head value dims (value_length_mla)
  // Prompts of at least this many tokens run their positions in the plain
  // form where the backend has it (model/mla_block.h: mla_plain_min_prompt()).
  int32_t plain_min_prompt = 0;
  bool enabled() const { return kv_lora_rank > 0; }
};

// Gated delta-net layers' shapes (the "{arch}.ssm.*" keys).
struct DeltaNetShape {
  int32_t conv_kernel = 0;  // ssm.conv_kernel
  int32_t d_k = 0;          // ssm.state_size: q/k head size
  int32_t n_k_heads = 0;    // ssm.group_count
  int32_t n_v_heads = 0;    // ssm.time_step_rank
  int32_t d_v = 0;          // ssm.inner_size / n_v_heads
  int32_t channels() const { return 2 * n_k_heads * d_k + n_v_heads * d_v; }
  int32_t inner() const { return n_v_heads * d_v; }
  // Floats of one sequence's state in one layer: the conv's last inputs, then
  // the delta rule's [n_v_heads][d_k][d_v].
  int64_t conv_state_floats() const { return static_cast<int64_t>(conv_kernel - 1) * channels(); }
  int64_t delta_state_floats() const { return static_cast<int64_t>(n_v_heads) * d_k * d_v; }
  int64_t state_floats() const { return conv_state_floats() + delta_state_floats(); }
};

struct ModelHParams {
  std::string arch;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;  // attention.key_length, else n_embd / n_head
  int32_t n_ff = 0;
  int32_t n_rot = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  RopeStyle rope_style = RopeStyle::kNorm;
  float rms_eps = 1e-5f;
  // Mixture of experts ("{arch}.expert_count" > 0): n_expert_used of
  // n_expert experts per token, each a gated FFN of n_ff_exp
  // (expert_feed_forward_length, else feed_forward_length).
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  // A gated shared expert of this size beside the routed ones (set by the
  // family: qwen35moe); 0: none.
  int32_t n_ff_shexp = 0;

  // Set by the family (defaults: a Llama block).
  float attn_scale = 0;         // scores = q.k * attn_scale (default 1 / sqrt(head_dim))
  float attn_softcap = 0;       // > 0: scores capped as c * tanh(s / c)
  float final_softcap = 0;      // > 0: logits capped the same way
  float embd_scale = 1.0f;      // token embeddings times this (Gemma: sqrt(n_embd))
  Activation ffn_act = Activation::kSilu;
  std::vector<RopeTableSpec> rope_tables;  // one unless the family has more
  std::vector<LayerSpec> layers;           // [n_layer]
  DeltaNetShape delta_net;                 // when some layer is recurrent
  // Full-attention layers whose q projection holds per head [q, gate] and
  // whose attention output is multiplied by sigmoid(gate) (Qwen3.5).
  bool attn_output_gate = false;
  MlaShape mla;  // MLA layers (deepseek2)
  // Routed experts weighed as the file says (deepseek2: gating func, scale,
  // renormalisation) instead of the family's FfnOptions::router.
  std::optional<RouterOptions> router;

  // Per-layer inputs (Gemma 4): floats per token and layer; 0: none.
  int32_t n_embd_per_layer = 0;

  // n_head_kv, head_dim and n_ff are the largest over the layers (buffers
  // are sized by them); a layer's own are in its LayerSpec.
  int32_t n_embd_q() const { return n_head * head_dim; }
  int32_t n_embd_kv() const { return n_head_kv * head_dim; }
  const LayerSpec& layer(int32_t l) const { return layers[static_cast<size_t>(l)]; }
  int32_t n_embd_q(int32_t l) const { return n_head * layer(l).head_dim; }
  int32_t n_embd_kv(int32_t l) const { return layer(l).n_head_kv * layer(l).head_dim; }
  // The layer whose KV cache layer l attends to (itself unless shared).
  int32_t kv_layer(int32_t l) const { return layer(l).kv_source >= 0 ? layer(l).kv_source : l; }
  bool owns_kv(int32_t l) const { return !layer(l).recurrent && layer(l).kv_source < 0; }
  bool moe() const { return n_expert > 0; }
  // Layer l's FFN has experts.
  bool moe_layer(int32_t l) const { return moe() && !layers[static_cast<size_t>(l)].dense_ffn; }
  bool has_recurrent() const {
    for (const LayerSpec& l : layers)
      if (l.recurrent) return true;
    return false;
  }
  // Why the prefix cache's blocks cannot leave the KV pool for the host and
  // disk tiers (null: they can): the model-side reasons, in the words the
  // engine's and the plan's notes use.
  const char* no_prefix_tier_reason() const;
  int32_t n_recurrent() const {
    int32_t n = 0;
    for (const LayerSpec& l : layers) n += l.recurrent ? 1 : 0;
    return n;
  }

  // Reads and validates the common keys, then the architecture's (found in
  // model/registry.h by general.architecture); throws FormatError
  // naming the file and key, or listing the supported architectures.
  static ModelHParams from_gguf(const GgufFile& f);
};

// A positive integer key of the file, at most `max`; FormatError otherwise.
int32_t require_positive_key(const GgufFile& f, const std::string& key, int64_t max = 1 << 30);
// The same for a key that is one value or an array of one per layer: n
// values (a single value repeated).
std::vector<int32_t> per_layer_key(const GgufFile& f, const std::string& key, int32_t n,
                                   int64_t max = 1 << 30);

}  // namespace pagellm
