// POST /v1/embeddings (OpenAI's shape): the request parsed and tokenized,
// run through the engine (each input a sequence of its own, all in the same
// steps as everything else), and the response written, with the vectors as
// float arrays or base64 (little-endian float32, what the openai clients ask
// for by default).
//
// `input`: a string, an array of strings, an array of token ids, or an array
// of arrays of token ids (at most kMaxEmbeddingInputs). `encoding_format`:
// "float" (default) or "base64". `model`: any string (the loaded model
// answers). `dimensions` is refused: the model's width is the only one.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "engine/pooling.h"
#include "server/openai_request.h"

namespace pagellm {

class Tokenizer;

constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit

struct EmbeddingsRequest {
  std::string model;
  std::vector<PromptInput> inputs;
  bool base64 = false;
};

// Throws ApiError (400) for malformed JSON, a missing or empty `input`,
// wrong types, an unknown encoding_format and `dimensions`.
EmbeddingsRequest parse_embeddings_request(const std::string& body);

// Each input's token ids: text tokenized as a completion prompt is (BOS when
// the model adds one). Throws ApiError (400): an input without tokens, an id
// outside the vocabulary (invalid_token_id), an input over the context
// (context_length_exceeded).
std::vector<std::vector<int32_t>> prepare_embeddings(const EmbeddingsRequest& req,
                                                     const Tokenizer& tokenizer,
                                                     const ModelLimits& limits);

// Runs every input through the engine, at most `window` at a time, and
// returns the vectors in input order. Throws ApiError: 503 when the queue is
// full or the server is shutting down, 400 when the engine refuses an input,
// 500 when one fails.
std::vector<std::vector<float>> run_embeddings(AsyncEngine& engine,
                                               std::vector<std::vector<int32_t>> inputs,
                                               Pooling pooling, size_t window = 64);

// Little-endian float32 bytes in base64.
std::string base64_floats(const std::vector<float>& v);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
//  "model", "usage": {"prompt_tokens", "total_tokens"}}.
nlohmann::ordered_json embeddings_response(const std::vector<std::vector<float>>& vectors,
                                           bool base64, const std::string& model,
                                           int64_t prompt_tokens);

}  // namespace pagellm
