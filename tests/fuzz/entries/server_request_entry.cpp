// The server's request parsing and validation, without a model: JSON bodies
// of /v1/chat/completions and /v1/completions through parse_completion_request
// and prepare_completion (tokenizing with the shipped model's vocabulary,
// rendering chat with its template).
#include <string>

#include "entries/fuzz_entries.h"
#include "entries/shipped_model.h"
#include "server/openai_request.h"
#include "util/error.h"

namespace pagellm::fuzz {

int server_request(const uint8_t* data, size_t size) {
  const ShippedModel& v = shipped_model();
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
  try {
    check_prepared(prepare_completion(req, *v.tok, *v.chat, v.limits), v.limits);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) violated("a bad request must be refused with a 4xx");
  }
  return 0;
}

}  // namespace pagellm::fuzz
