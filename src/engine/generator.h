// Runs one request end to end on one sequence: prompt prefill (in chunks of
// at most max_batch tokens), then token-by-token decode with sampling, over a
// paged KV cache sized for prompt + max_tokens. The multi-sequence scheduler
// replaces this loop in the engine; the forward pass already takes batches.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace pagellm {

struct GenerateOptions {
  int32_t max_tokens = 128;  // tokens to generate (-n)
  int32_t context = 0;       // KV cache size in tokens; 0 = the model's trained context
  bool ignore_eos = false;
  DType kv_type = DType::F16;
  int32_t block_size = 16;
  int32_t max_batch = 512;  // prefill chunk
  SamplingParams sampling;
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string text;
  double prefill_seconds = 0;
  double decode_seconds = 0;  // from the first to the last generated token
  std::string stop_reason;    // "eos", "length", "context"
};

class Generator {
 public:
  Generator(LlamaModel& model, const Tokenizer& tokenizer, ThreadPool& pool);

  // Called with each new token and the text it completes (may be empty while
  // a UTF-8 character is split across tokens).
  using OnToken = std::function<void(int32_t id, const std::string& text)>;

  // Throws ConfigError when the prompt does not fit the context.
  GenerateResult generate(const std::vector<int32_t>& prompt_ids, const GenerateOptions& opts,
                          const OnToken& on_token = {});

 private:
  LlamaModel& model_;
  const Tokenizer& tokenizer_;
  ThreadPool& pool_;
};

}  // namespace pagellm
