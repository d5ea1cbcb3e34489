#include <cstdio>
#include <cstdlib>

#include "entries/fuzz_entries.h"

namespace pagellm::fuzz {

const std::vector<Target>& targets() {
  static const std::vector<Target> t = {
      {"gguf", gguf},
      {"tokenizer", tokenizer},
      {"chat_template", chat_template},
      {"server_request", server_request},
      {"device_map", device_map},
      {"grammar", grammar},
      {"json_schema", json_schema},
      {"tool_calls", tool_calls},
      {"responses_request", responses_request},
      {"anthropic_request", anthropic_request},
      {"embeddings_request", embeddings_request},
      {"llama_request", llama_request},
      {"step_message", step_message},
      {"block_file", block_file},
  };
  return t;
}

void violated(const char* what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

}  // namespace pagellm::fuzz
