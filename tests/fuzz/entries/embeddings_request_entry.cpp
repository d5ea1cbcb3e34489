// The embeddings request (POST /v1/embeddings) without a model: a body
// through parse_embeddings_request, prepare_embeddings on the shipped model's
// vocabulary and 512-token context, and the response written for made-up
// vectors in the encoding asked for.
#include <string>

#include "entries/fuzz_entries.h"
#include "entries/shipped_model.h"
#include "server/embeddings_api.h"
#include "util/error.h"

namespace pagellm::fuzz {

int embeddings_request(const uint8_t* data, size_t size) {
  const ShippedModel& v = shipped_model();
  const std::string body(reinterpret_cast<const char*>(data), size);
  EmbeddingsRequest req;
  try {
    req = parse_embeddings_request(body);
  } catch (const ApiError& e) {
    if (e.status != 400) violated("a bad body must be refused with a 400");
    return 0;
  }
  if (req.inputs.empty()) violated("an accepted request has an input");
  if (req.inputs.size() > kMaxEmbeddingInputs) violated("more inputs than the limit");
  std::vector<std::vector<int32_t>> ids;
  try {
    ids = prepare_embeddings(req, *v.tok, v.limits);
  } catch (const ApiError& e) {
    if (e.status != 400) violated("a bad input must be refused with a 400");
    return 0;
  }
  if (ids.size() != req.inputs.size()) violated("one token list per input");
  int64_t tokens = 0;
  for (const auto& in : ids) {
    if (in.empty()) violated("an input without tokens was accepted");
    if (static_cast<int64_t>(in.size()) > v.limits.max_context)
      violated("an input over the context was accepted");
    for (int32_t id : in)
      if (id < 0 || id >= v.limits.n_vocab) violated("a token id outside the vocabulary");
    tokens += static_cast<int64_t>(in.size());
  }
  // Three floats: 12 bytes, 16 base64 characters without padding.
  const std::vector<std::vector<float>> vectors(ids.size(), {0.5f, -1.0f, 3.0f});
  const auto out = embeddings_response(vectors, req.base64, "m", tokens);
  if (out["data"].size() != ids.size()) violated("one embedding per input");
  const auto& e = out["data"][0]["embedding"];
  if (req.base64 ? !(e.is_string() && e.get<std::string>() == "AAAAPwAAgL8AAEBA")
                 : !(e.is_array() && e.size() == 3))
    violated("the embedding is not in the encoding asked for");
  if (out["usage"]["prompt_tokens"] != tokens) violated("usage counts every input's tokens");
  return 0;
}

}  // namespace pagellm::fuzz
