// Multi-head latent attention (DeepSeek V2/V3's MLA), run absorbed as
// llama.cpp runs it: each token's K and V come from one latent c (kv_lora_rank
// values, RMS-normed) and one k_pe (n_rot values, RoPE'd) shared by all heads,
// and the cache keeps only the row [c | k_pe] (a latent cache: KvLayerView::
// v_dim = kv_lora_rank). Per head h:
//   q_h = [q_nope_h | q_pe_h]                 (attn_q, or attn_q_a, norm, attn_q_b)
//   query_h = [q_nope_h W_kb_h^T | rope(q_pe_h)]   (attn_k_b: q_nope into latent space)
//   o_h = softmax(query_h . [c | k_pe] * scale) c  (MQA over the latent rows)
//   out = concat_h(o_h W_vb_h^T) W_o                (attn_v_b, then attn_output)
// which equals the plain multi-head form (k_h = [c W_kb_h | k_pe], v_h = c W_vb_h)
// while reading kv_lora_rank + n_rot values per position instead of
// n_head * (2 * head size).
#pragma once

#include <cstdint>

#include "model/blocks.h"

namespace pagellm {

// The layer's MLA tensors (attn_norm, q projection(s), attn_kv_a_mqa,
// attn_kv_a_norm, attn_k_b, attn_v_b, attn_output).
void mla_attention_tensors(const ModelHParams& hp, int32_t layer, TensorList& out);
// Floats per token of LayerContext::extra the block needs.
int64_t mla_workspace_floats(const ModelHParams& hp);
// x += MLA(x), the step's latent rows written to the layer's cache.
void mla_attention_block(LayerContext& c);

}  // namespace pagellm
