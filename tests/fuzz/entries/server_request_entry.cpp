// The server's request parsing and validation, without a model: JSON bodies
// of /v1/chat/completions and /v1/completions through parse_completion_request
// and prepare_completion (tokenizing with the shipped model's vocabulary,
// rendering chat with its template).
#include <string>

#include "entries/fuzz_entries.h"
#include "gguf/gguf_reader.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pagellm::fuzz {

namespace {

struct Vocabulary {
  Vocabulary() {
    file = GgufFile::open(std::string(PAGELLM_TEST_DATA) + "/stories260K.gguf");
    tok = Tokenizer::from_gguf(*file);
    chat = ChatPrompt::for_model(*file, tok->vocab());
  }
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<ChatPrompt> chat;
};

}  // namespace

int server_request(const uint8_t* data, size_t size) {
  static const Vocabulary v;
  if (size < 1) return 0;
  const Endpoint endpoint = data[0] & 1 ? Endpoint::kCompletion : Endpoint::kChat;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  CompletionRequest req;
  try {
    req = parse_completion_request(body, endpoint);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) violated("a bad body must be refused with a 4xx");
    return 0;
  }
  if (req.n < 1) violated("parsed n < 1");
  ModelLimits limits;
  limits.n_vocab = v.tok->n_vocab();
  limits.max_context = 512;
  try {
    const PreparedCompletion p = prepare_completion(req, *v.tok, *v.chat, limits);
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
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) violated("a bad request must be refused with a 4xx");
  }
  return 0;
}

}  // namespace pagellm::fuzz
