// The OpenAI-compatible HTTP server (cpp-httplib):
//
//   POST /v1/chat/completions, POST /v1/completions   (JSON or SSE stream)
//   POST /v1/responses, GET/DELETE /v1/responses/{id}  (OpenAI Responses API)
//   POST /v1/messages, POST /v1/messages/count_tokens  (Anthropic Messages API)
//   POST /v1/embeddings  (with ServingContext::embeddings; embeddings_api.h)
//   GET  /v1/models, GET /v1/plan
//   POST /tokenize, /detokenize, /apply-template, /infill; GET /props, /slots
//                   llama-server's own endpoints (llama_api.h)
//   GET  /          the built-in chat page (web_ui.h) and /favicon.ico, unless turned off
//   GET  /health    503 while loading or shutting down, 200 when ready (never needs a key)
//   GET  /metrics   Prometheus text (never needs a key)
//
// It listens before the model is loaded (set_ready() switches it on), so
// /health can say "loading". Every connection gets a thread of its own (see
// ElasticTaskQueue), so long streams never hold up short requests; the
// threads talk to the engine thread only through AsyncEngine's bounded
// queue. Errors have OpenAI's shape (Anthropic's under /v1/messages); every
// request gets one access-log line. CORS (cors.h) is off unless origins are
// listed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "engine/pooling.h"
#include "server/chat_prompt.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace pagellm {

class Tokenizer;

// What a loaded model provides; must outlive the server's threads.
struct ServingContext {
  int64_t created = 0;  // unix time the model was loaded
  const Tokenizer* tokenizer = nullptr;
  AsyncEngine* engine = nullptr;
  const ChatPrompt* chat = nullptr;
  ModelLimits limits;
  nlohmann::json plan;  // GET /v1/plan
  // POST /v1/embeddings answers (else a 400 saying how to turn it on), pooling so.
  bool embeddings = false;
  Pooling pooling = Pooling::kMean;
  // For the sampling fields a request leaves out (OpenAI's unless serve's
  // flags or the model say otherwise).
  SamplingDefaults sampling_defaults = SamplingDefaults::openai();
};

struct HttpServerOptions {
  std::string model_id = "pagellm";  // the name /v1/models lists and responses carry
  // Empty: no key needed. Else /v1/* needs it as "Authorization: Bearer KEY"
  // or "x-api-key: KEY" (Anthropic's header).
  std::string api_key;
  size_t max_threads = 1024;         // connections served at once
  size_t max_body_bytes = 16u << 20;
  // A stream that has nothing to send for this long sends an SSE comment, so
  // a client that went away is noticed (and its request aborted) while queued.
  std::chrono::milliseconds stream_ping{2000};
  // `pagellm --version`'s line: in /v1/models ("pagellm_version") and in
  // /metrics (pagellm_build_info{version="..."} 1). Empty: left out.
  std::string version;
  // Origins allowed to call the API from a browser ("*": any); empty: CORS off.
  std::vector<std::string> cors_origins;
  bool web_ui = true;                     // GET / serves the chat page
  bool slots = false;                     // GET /slots answers (else 501), as llama-server's --slots
  size_t response_store_capacity = 256;  // /v1/responses kept for previous_response_id
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; port 0 picks a free one. Returns the port.
  // Throws SystemError when the address cannot be bound.
  int bind(const std::string& host, int port);
  // Serves until stop() (blocks; run it on a thread of its own).
  void run();

  void set_ready(std::shared_ptr<const ServingContext> context);
  // From now on new requests get 503 (in-flight ones go on).
  void begin_shutdown();
  // Completion requests being answered, streams included.
  int active_requests() const;
  // Stops listening, closes connections, joins the connection threads.
  // Safe to call from another thread before run() has started.
  void stop();

  ServerMetrics& metrics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagellm
