// Model hyper-parameters read from GGUF metadata ("{arch}.*" keys) for the
// architectures this engine runs: `llama` (Llama 1/2/3, Mistral, SmolLM,
// TinyLlama) and `qwen2` (QKV bias, NeoX RoPE).
#pragma once

#include <cstdint>
#include <string>

#include "backend/cpu/ops.h"
#include "gguf/gguf_reader.h"

namespace pagellm {

struct ModelHParams {
  std::string arch;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int32_t n_rot = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  RopeStyle rope_style = RopeStyle::kNorm;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;

  int32_t n_embd_kv() const { return n_head_kv * head_dim; }

  // Reads and validates; throws FormatError naming the file and key.
  static ModelHParams from_gguf(const GgufFile& f);
};

}  // namespace pagellm
