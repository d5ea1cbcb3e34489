#include "server/embeddings_api.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <limits>

#include "server/json_fields.h"
#include "server/token_ids.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

namespace {

using json = nlohmann::json;

}  // namespace

EmbeddingsRequest parse_embeddings_request(const std::string& body) {
  const json j = parse_request_body<json>(body);
  EmbeddingsRequest r;
  if (const json* m = json_field(j, "model")) {
    if (!m->is_string())
      bad_request("model", fmt::format("'model' must be a string, not {}", json_kind(*m)));
    r.model = m->get<std::string>();
  }
  if (const json* f = json_field(j, "encoding_format")) {
    if (!f->is_string())
      bad_request("encoding_format",
                  fmt::format("'encoding_format' must be a string, not {}", json_kind(*f)));
    const std::string& s = f->get_ref<const std::string&>();
    if (s != "float" && s != "base64")
      bad_request("encoding_format",
                  fmt::format("'encoding_format' must be 'float' or 'base64', not '{}'", s));
    r.base64 = s == "base64";
  }
  if (json_field(j, "dimensions"))
    throw ApiError(400,
                   "'dimensions' is not supported: the vectors have the model's own width",
                   "invalid_request_error", "dimensions", "unsupported_parameter");
  if (const json* u = json_field(j, "user"); u && !u->is_string())
    bad_request("user", fmt::format("'user' must be a string, not {}", json_kind(*u)));
  r.inputs = parse_prompt_inputs(j, {"input", "an input array", true, kMaxEmbeddingInputs});
  return r;
}

std::vector<std::vector<int32_t>> prepare_embeddings(const EmbeddingsRequest& req,
                                                     const Tokenizer& tokenizer,
                                                     const ModelLimits& limits) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(req.inputs.size());
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const PromptInput& p = req.inputs[i];
    const std::string param = req.inputs.size() > 1 ? fmt::format("input[{}]", i) : "input";
    std::vector<int32_t> ids;
    if (!p.is_tokens) {
      ids = tokenizer.encode(p.text, /*add_special=*/true);
    } else {
      ids = checked_token_ids(p.tokens, limits.n_vocab, param);
    }
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n == 0) bad_request(param, fmt::format("'{}' has no tokens", param));
    if (n > limits.max_context)
      bad_request(
          param,
          fmt::format("This model's maximum context length is {} tokens, but {} is {} tokens.",
                      limits.max_context, param, n),
          "context_length_exceeded");
    out.push_back(std::move(ids));
  }
  return out;
}

std::vector<std::vector<float>> run_embeddings(AsyncEngine& engine,
                                               std::vector<std::vector<int32_t>> inputs,
                                               Pooling pooling, size_t window) {
  struct Live {
    size_t index;
    std::shared_ptr<RequestStream> stream;
  };
  std::vector<std::vector<float>> out(inputs.size());
  std::vector<Live> live;
  const auto cancel_all = [&] {
    for (auto& l : live) l.stream->cancel();
  };
  size_t next = 0, done = 0;
  size_t wave = std::max<size_t>(window, 1);
  while (done < inputs.size()) {
    // Submitted together, the inputs run as sequences of the same steps.
    // With the queue full: what is in flight finishes first, or (nothing in
    // flight) smaller waves are tried.
    const size_t n = std::min(wave - std::min(wave, live.size()), inputs.size() - next);
    if (n > 0) {
      std::vector<Request> reqs(n);
      for (size_t i = 0; i < n; ++i) {
        reqs[i].prompt = inputs[next + i];
        reqs[i].embedding = true;
        reqs[i].pooling = pooling;
      }
      try {
        auto streams = engine.submit_all(std::move(reqs));
        for (size_t i = 0; i < n; ++i) live.push_back({next + i, std::move(streams[i])});
        next += n;
      } catch (const QueueFullError& e) {
        const bool closing = std::string(e.what()).find("shutting down") != std::string::npos;
        if (!closing && live.empty() && n > 1) {
          wave = n / 2;
          continue;
        }
        if (closing || live.empty()) {
          cancel_all();
          throw ApiError(503,
                         closing ? "the server is shutting down"
                                 : std::string("the server is busy: ") + e.what() + "; retry later",
                         "server_error", "", closing ? "shutting_down" : "queue_full");
        }
      }
    }
    for (size_t k = 0; k < live.size();) {
      // The oldest is waited for; the others only looked at.
      auto ev = live[k].stream->next(std::chrono::milliseconds(k == 0 ? 200 : 0));
      if (!ev || !ev->finished) {
        ++k;
        continue;
      }
      if (ev->finish_reason != FinishReason::kStop || ev->embedding.empty()) {
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        cancel_all();
        if (ev->finish_reason == FinishReason::kAbort)
          throw ApiError(503, "the request was aborted: the server is shutting down",
                         "server_error", "", "aborted");
        const std::string why = ev->error.empty() ? "the embedding failed" : ev->error;
        if (ev->finish_reason == FinishReason::kError && ev->prompt_tokens == 0)
          throw ApiError(400, why, "invalid_request_error");  // refused by the engine
        throw ApiError(500, why, "server_error");
      }
      out[live[k].index] = std::move(ev->embedding);
      ++done;
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return out;
}

std::string base64_floats(const std::vector<float>& v) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes;
  bytes.reserve(v.size() * 4);
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<uint8_t>(u >> (8 * b)));
  }
  std::string s;
  s.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = static_cast<uint32_t>(bytes[i]) << 16;
    if (n > 1) w |= static_cast<uint32_t>(bytes[i + 1]) << 8;
    if (n > 2) w |= bytes[i + 2];
    s += kAlphabet[(w >> 18) & 63];
    s += kAlphabet[(w >> 12) & 63];
    s += n > 1 ? kAlphabet[(w >> 6) & 63] : '=';
    s += n > 2 ? kAlphabet[w & 63] : '=';
  }
  return s;
}

nlohmann::ordered_json embeddings_response(const std::vector<std::vector<float>>& vectors,
                                           bool base64, const std::string& model,
                                           int64_t prompt_tokens) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    nlohmann::ordered_json item = {{"object", "embedding"}, {"index", i}};
    if (base64)
      item["embedding"] = base64_floats(vectors[i]);
    else
      item["embedding"] = vectors[i];
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace pagellm
