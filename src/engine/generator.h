// Runs one request at a time end to end through an Engine: prompt prefill
// (chunked by the engine's token budget), then token-by-token decode with
// sampling, streaming text as it completes. Used by `pagellm generate`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pagellm {

struct GenerateOptions {
  int32_t max_tokens = 128;  // tokens to generate (-n)
  bool ignore_eos = false;
  bool prompt_logits = false;  // keep the last prompt position's logits
  SamplingParams sampling;
  std::shared_ptr<const Grammar> grammar;  // constrained output (null: free text)
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string text;
  double prefill_seconds = 0;  // until the first token
  double decode_seconds = 0;   // from the first to the last generated token
  std::string stop_reason;     // "eos", "length", "context"
  std::vector<float> last_prompt_logits;  // GenerateOptions::prompt_logits
  std::string error;           // stop_reason "error": why
  uint64_t spec_proposed = 0;  // drafted tokens verified (speculative decoding)
  uint64_t spec_accepted = 0;  // of those, the ones that became output
};

class Generator {
 public:
  // The engine (and its KV cache) is built once from `config`.
  Generator(ModelRunner& model, const Tokenizer& tokenizer, ThreadPool& pool, EngineConfig config);
  ~Generator();

  // Called with each new token and the text it completes (may be empty while
  // a UTF-8 character is split across tokens; id -1 for trailing text).
  using OnToken = std::function<void(int32_t id, const std::string& text)>;

  // Throws ConfigError when the prompt does not fit the context.
  GenerateResult generate(const std::vector<int32_t>& prompt_ids, const GenerateOptions& opts,
                          const OnToken& on_token = {});
  Engine& engine() { return *engine_; }

 private:
  std::unique_ptr<Engine> engine_;
};

}  // namespace pagellm
