// Writes a random-weight model in GGUF for tests and benchmarks: seeded
// normal weights (std 0.02; norm weights 1 + 0.02 N, biases 0.02 N), the
// vocabulary (every tokenizer.* key) copied from another GGUF file. Any
// registered architecture (model/registry.h): its tensors are those of
// the family's own tensor table, so the file loads as the family reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace pagellm {

struct MakeModelSpec {
  // Any registered architecture, or "mixtral" (written as "llama" with experts).
  std::string arch = "llama";
  int32_t n_embd = 256;
  int32_t n_layer = 4;
  int32_t n_head = 8;
  int32_t n_head_kv = 4;
  int32_t n_ff = 512;
  int32_t n_ctx = 2048;
  std::string vocab_from;    // GGUF whose tokenizer.* keys are copied
  DType type = DType::Q4_0;  // of the 2-D weights
  // Of the routed experts' stacks (ffn_*_exps) when set, e.g. MXFP4 with Q8_0
  // elsewhere as real gpt-oss files; else `type`.
  std::optional<DType> expert_type;
  uint64_t seed = 1;
  bool tied = false;  // omit output.weight (reuse token_embd)
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  int32_t head_dim = 0;  // 0: n_embd / n_head; else written as attention.key_length
  // Sliding window of the families that have one (gemma2, gemma3; gpt-oss:
  // 32 when 0, on every other layer); 0: none.
  int32_t sliding_window = 0;
  // Mixture of experts: n_expert experts of n_ff_exp (0: n_ff), n_expert_used
  // per token; 0 experts: a dense FFN (mixtral, qwen3moe and gpt-oss default
  // to 8, top 2; gpt-oss also writes YaRN, factor 32, and expert biases).
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  // qwen35moe's gated shared expert (ffn_*_shexp): its feed-forward size (0: n_ff).
  int32_t n_ff_shexp = 0;
  // Rotated dims per head (rope.dimension_count); 0: all, qwen35 / qwen35moe: a quarter.
  int32_t rope_dims = 0;
  // Hybrid families (qwen35, qwen35moe): every full_attention_interval-th
  // layer is full attention, the others gated delta-net layers with these
  // shapes (ssm.*: conv kernel, q/k head size = state size, q/k heads, v heads).
  int32_t full_attention_interval = 4;
  int32_t ssm_conv_kernel = 4;
  int32_t ssm_state_size = 32;
  int32_t ssm_group_count = 2;
  int32_t ssm_v_heads = 4;
  // deepseek2 (MLA): head_dim is the q/k head (rope_dims of it rotated,
  // default half), values heads as wide, a latent of kv_lora_rank (0: 2 x
  // head size), one KV head; YaRN (factor 4); layer 0 dense, then 4 experts
  // top 2 (unless set) and one shared expert. expert_gating 2: sigmoid routing
  // with a selection bias (exp_probs_b), else softmax.
  int32_t kv_lora_rank = 0;
  int32_t expert_gating = 1;
};

// Architectures make-model writes: the registry's and "mixtral".
std::vector<std::string> make_model_architectures();

// Validates the spec (ConfigError with the reason) and writes `path`.
void make_model(const MakeModelSpec& spec, const std::string& path, ThreadPool& pool);

}  // namespace pagellm
