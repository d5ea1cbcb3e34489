// Writes a random-weight model in GGUF for tests and benchmarks: seeded
// normal weights (std 0.02; norm weights 1 + 0.02 N, biases 0.02 N), the
// vocabulary (every tokenizer.* key) copied from another GGUF file. Any
// registered architecture (model/arch/registry.h): its tensors are those of
// the family's own tensor table, so the file loads as the family reads it.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace pagellm {

struct MakeModelSpec {
  std::string arch = "llama";  // any registered architecture
  int32_t n_embd = 256;
  int32_t n_layer = 4;
  int32_t n_head = 8;
  int32_t n_head_kv = 4;
  int32_t n_ff = 512;
  int32_t n_ctx = 2048;
  std::string vocab_from;    // GGUF whose tokenizer.* keys are copied
  DType type = DType::Q4_0;  // of the 2-D weights
  uint64_t seed = 1;
  bool tied = false;  // omit output.weight (reuse token_embd)
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  int32_t head_dim = 0;  // 0: n_embd / n_head; else written as attention.key_length
  // Sliding window of the families that have one (gemma2, gemma3); 0: none.
  int32_t sliding_window = 0;
};

// Validates the spec (ConfigError with the reason) and writes `path`.
void make_model(const MakeModelSpec& spec, const std::string& path, ThreadPool& pool);

}  // namespace pagellm
