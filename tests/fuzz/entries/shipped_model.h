// What the server-side fuzz entries parse against instead of a loaded model:
// the shipped model's vocabulary and chat template (tests/data/stories260K.gguf)
// and its 512-token context. Loaded once per process.
#pragma once

#include <memory>
#include <string>

#include "entries/fuzz_entries.h"
#include "gguf/gguf_reader.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace pagellm::fuzz {

struct ShippedModel {
  ShippedModel() {
    file = GgufFile::open(std::string(PAGELLM_TEST_DATA) + "/stories260K.gguf");
    tok = Tokenizer::from_gguf(*file);
    chat = ChatPrompt::for_model(*file, tok->vocab());
    limits.n_vocab = tok->n_vocab();
    limits.max_context = 512;
  }
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<ChatPrompt> chat;
  ModelLimits limits;
};

inline const ShippedModel& shipped_model() {
  static const ShippedModel m;
  return m;
}

// Checks what prepare_completion accepted: runnable by the engine.
inline void check_prepared(const PreparedCompletion& p, const ModelLimits& limits) {
  if (p.requests.size() != p.prompt_tokens.size()) violated("one prompt size per request");
  for (const Request& r : p.requests) {
    if (r.prompt.empty()) violated("an empty prompt was accepted");
    if (static_cast<int64_t>(r.prompt.size()) >= limits.max_context)
      violated("a prompt over the context was accepted");
    for (int32_t id : r.prompt)
      if (id < 0 || id >= limits.n_vocab) violated("a token id outside the vocabulary");
    if (r.max_tokens < 0 || r.n < 1) violated("bad max_tokens or n");
    r.sampling.validate();  // throws ConfigError: parsing let a bad value through
  }
}

}  // namespace pagellm::fuzz
