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
// The prompt length from which prompt positions run the plain form:
// PAGELLM_MLA_PLAIN_MIN_PROMPT (0: every prompt), never without it. Off by
// default: through the dense kernel (one head's K/V re-read per query token)
// it was at best 8-15% ahead of the latent kernel for one V2-Lite-shaped
// layer at 2-4k tokens and 12% behind end to end on bench/mla_bench.sh's
// model (README). Read when a model loads (MlaShape::plain_min_prompt):
// fixed for its run.
int32_t mla_plain_min_prompt();
// Whether position `pos` of a sequence whose prompt ends at prompt_end
// (Batch::step_from) runs in the plain form on a backend that has it.
inline bool mla_runs_plain(const ModelHParams& hp, int32_t pos, int32_t prompt_end) {
  return pos < prompt_end && prompt_end >= hp.mla.plain_min_prompt;
}
// Floats of LayerContext::mla_plain the plain form needs for contexts of up
// to n_ctx positions and steps of `tokens` tokens (0: not MLA).
int64_t mla_plain_floats(const ModelHParams& hp, int64_t n_ctx, int64_t tokens);
// x += MLA(x), the step's latent rows written to the layer's cache. Decoded
// positions (at or past their sequence's Batch::step_from) run absorbed;
// prompt positions of long enough prompts may run the plain form where the
// backend has it (Backend::mla_plain_form: the CPU): fewer multiply-adds per
// position pair (K of dq = 192 and V of dv = 128 per head against the
// latent's 576 and 512 at V2's shape), at the cost of expanding each prompt
// sequence's context from the cache per step (no persistent memory: the
// expansion is mla_plain's scratch). The forms differ in rounding only, and
// the choice depends on the position alone.
void mla_attention_block(LayerContext& c);

}  // namespace pagellm
