#include "server/http_server.h"

#include <fmt/format.h>

#include <cerrno>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <mutex>
#include <thread>

#include "server/access_log.h"
#include "server/anthropic_api.h"
#include "server/completion_session.h"
#include "server/connection_watch.h"
#include "server/cors.h"
#include "server/embeddings_api.h"
#include "server/http_routes.h"
#include "server/http_threads.h"
#include "server/llama_api.h"
#include "server/openai_response.h"
#include "server/response_store.h"
#include "server/responses_api.h"
#include "server/session_output.h"
#include "server/sse.h"
#include "server/web_ui.h"
#include "util/error.h"

namespace pagellm {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// The request being answered on this connection thread: httplib runs routing,
// the handler, the stream's content provider and the logger on one thread.
struct Current {
  AccessRecord record;
  Clock::time_point start;
  bool started = false;
  // The connection, to notice a client that leaves before a non-streamed reply.
  int local_port = -1, remote_port = -1;
  std::string remote_addr;
  bool anthropic = false;  // under /v1/messages: errors in Anthropic's shape
};
thread_local Current t_current;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool same_secret(const std::string& a, const std::string& b) {
  // Length leaks, content does not.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump_json(t_current.anthropic ? anthropic_error_json(e) : error_json(e)),
                  "application/json");
  t_current.record.error = e.what();
}

// The prepared engine work of one completion request, in any API, and the
// wire format its results go out in.
struct CompletionJob {
  CompletionRequest request;
  PreparedCompletion prepared;
  std::unique_ptr<SessionOutput> output;
};

// Responses and Anthropic take their token limit as an upper bound: left
// out of the chat request (so the context caps it), then applied here.
void cap_max_tokens(PreparedCompletion& prep, std::optional<int64_t> max_tokens) {
  if (!max_tokens) return;
  for (auto& r : prep.requests)
    r.max_tokens = static_cast<int32_t>(std::min<int64_t>(r.max_tokens, *max_tokens));
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o)
      : opts(std::move(o)), cors(opts.cors_origins), responses(opts.response_store_capacity) {}

  HttpServerOptions opts;
  CorsPolicy cors;
  ResponseStore responses;
  httplib::Server svr;
  ServerMetrics metrics;
  AccessLog log;
  std::mutex ctx_mu;
  std::shared_ptr<const ServingContext> ctx;
  std::atomic<bool> draining{false};
  std::atomic<int> active{0};
  std::atomic<uint64_t> next_id{1};
  int listen_fd = -1;
  int port = 0;  // bound
  std::atomic<bool> run_entered{false}, run_exited{false}, stopping{false};
  RouteTable routes;

  std::shared_ptr<const ServingContext> context() {
    std::lock_guard<std::mutex> lock(ctx_mu);
    return ctx;
  }

  // The context, or a 503 (loading, shutting down) sent and nullptr.
  std::shared_ptr<const ServingContext> ready_or_503(httplib::Response& res) {
    if (draining) {
      send_error(res,
                 ApiError(503, "the server is shutting down", "server_error", "", "shutting_down"));
      return nullptr;
    }
    auto c = context();
    if (!c) send_error(res, ApiError(503, "the model is loading", "server_error", "", "loading"));
    return c;
  }

  void setup();
  void completions(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  void openai_responses(const httplib::Request& req, httplib::Response& res);
  void anthropic_messages(const httplib::Request& req, httplib::Response& res);
  void anthropic_count_tokens(const httplib::Request& req, httplib::Response& res);
  void embeddings(const httplib::Request& req, httplib::Response& res);
  void serve_metrics(httplib::Response& res);
  // A JSON answer made from the loaded model (a 503 while there is none), or its ApiError.
  template <class Fn>
  void answer(httplib::Response& res, const Fn& make) {
    auto c = ready_or_503(res);
    if (!c) return;
    try {
      send_json(res, 200, make(*c));
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  }
  CompletionJob infill_job(const std::string& body, const ServingContext& c);
  // Prepares (make), runs and answers one completion request of any API.
  void run_job(httplib::Response& res,
               const std::function<CompletionJob(const ServingContext&)>& make);
  void stream(std::shared_ptr<CompletionSession> session, std::shared_ptr<const ServingContext> c,
              httplib::Response& res);
};

void HttpServer::Impl::setup() {
  svr.new_task_queue = [max = opts.max_threads] { return new ElasticTaskQueue(max); };
  svr.set_tcp_nodelay(true);
  svr.set_keep_alive_max_count(1000);
  // Idle keep-alive connections hold shutdown up to this long.
  svr.set_keep_alive_timeout(2);
  svr.set_read_timeout(30);
  svr.set_write_timeout(10);
  svr.set_payload_max_length(opts.max_body_bytes);
  svr.set_socket_options([this](socket_t sock) {
    // SO_REUSEADDR (a restart binds through TIME_WAIT), not httplib's default
    // SO_REUSEPORT: with it a second server binds a taken port and the two
    // share its connections unnoticed.
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = sock;
  });

  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_current = Current{};
    t_current.start = Clock::now();
    t_current.started = true;
    t_current.anthropic = req.path.rfind("/v1/messages", 0) == 0;
    t_current.local_port = req.local_port;
    t_current.remote_port = req.remote_port;
    t_current.remote_addr = req.remote_addr;
    if (cors.enabled()) {
      const std::string origin = req.get_header_value("Origin");
      // A pre-flight carries no credentials: it is answered before the key check.
      if (req.method == "OPTIONS" && routes.api_path(req.path)) {
        for (const auto& [k, v] :
             cors.preflight_headers(origin, req.get_header_value("Access-Control-Request-Headers")))
          res.set_header(k, v);
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
      for (const auto& [k, v] : cors.response_headers(origin)) res.set_header(k, v);
    }
    if (!opts.api_key.empty() && routes.needs_key(req.path)) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string x_api_key = req.get_header_value("x-api-key");
      const std::string prefix = "Bearer ";
      const bool ok =
          (auth.rfind(prefix, 0) == 0 && same_secret(auth.substr(prefix.size()), opts.api_key)) ||
          (!x_api_key.empty() && same_secret(x_api_key, opts.api_key));
      if (!ok) {
        send_error(res, ApiError(401,
                                 auth.empty() && x_api_key.empty()
                                     ? "no API key provided (Authorization: Bearer KEY, or x-api-key: KEY)"
                                     : "incorrect API key provided",
                                 t_current.anthropic ? "authentication_error" : "invalid_request_error",
                                 "", "invalid_api_key"));
        // The request's body has not been read: the connection cannot carry
        // another request, so it closes (else it would sit until the read timeout).
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    Current& cur = t_current;
    AccessRecord& r = cur.record;
    if (r.id.empty()) r.id = fmt::format("req-{}", next_id++);
    r.method = req.method;
    r.path = req.path;
    r.remote = req.remote_addr;
    r.status = res.status;
    r.duration_s =
        cur.started ? std::chrono::duration<double>(Clock::now() - cur.start).count() : 0.0;
    const std::string label = routes.label(req.path);
    metrics.count_http(label, res.status);
    // Clients poll /health often: only its failures are worth a line.
    if (!(label == "/health" && res.status == 200)) log.write(r);
    t_current = Current{};
  });

  svr.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        switch (res.status) {
          case 404:
            message = fmt::format("Invalid URL ({} {})", req.method, req.path);
            break;
          case 413:
            message = "the request body is too large";
            break;
          default:
            message = fmt::format("HTTP {}", res.status);
        }
        send_error(res, ApiError(res.status, message, "invalid_request_error"));
        return httplib::Server::HandlerResponse::Handled;
      }));

  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_error(res, ApiError(500, "internal error: " + what, "server_error"));
      });

  auto model_json = [this](const ServingContext& c) {
    return json{{"id", opts.model_id},
                {"object", "model"},
                {"created", c.created},
                {"owned_by", "pagellm"},
                {"max_model_len", c.limits.max_context},
                {"pagellm_version", opts.version}};
  };
  auto serve_asset = [](httplib::Response& res, const WebAsset& a) {
    res.set_header("Content-Security-Policy", std::string(web_ui_csp()));
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(a.body), std::string(a.content_type));
  };
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  constexpr bool kKey = true, kOpen = false, kApi = true, kPage = false;
  // method, path, label ("" = the path), needs the key, API path, handler.
  std::vector<Route> table = {
      {"GET", "/health", "", kOpen, kApi, [this](Req, Res res) {
         if (draining) return send_json(res, 503, {{"status", "shutting_down"}});
         if (!context()) return send_json(res, 503, {{"status", "loading"}});
         send_json(res, 200, {{"status", "ok"}});
       }},
      {"GET", "/metrics", "", kOpen, kApi, [this](Req, Res res) { serve_metrics(res); }},
      {"GET", "/v1/models", "", kKey, kApi, [this, model_json](Req, Res res) {
         auto c = ready_or_503(res);
         if (!c) return;
         send_json(res, 200, {{"object", "list"}, {"data", json::array({model_json(*c)})}});
       }},
      {"GET", R"(/v1/models/(.+))", "/v1/models/{id}", kKey, kApi, [this, model_json](Req req, Res res) {
         auto c = ready_or_503(res);
         if (!c) return;
         const std::string id = req.matches[1];
         if (id != opts.model_id)
           return send_error(res, ApiError(404, fmt::format("The model '{}' does not exist", id),
                                           "invalid_request_error", "model", "model_not_found"));
         send_json(res, 200, model_json(*c));
       }},
      {"GET", "/v1/plan", "", kKey, kApi, [this](Req, Res res) {
         auto c = ready_or_503(res);
         if (!c) return;
         res.set_content(dump_json(c->plan), "application/json");
       }},
      {"POST", "/v1/chat/completions", "", kKey, kApi,
       [this](Req req, Res res) { completions(req, res, Endpoint::kChat); }},
      {"POST", "/v1/completions", "", kKey, kApi,
       [this](Req req, Res res) { completions(req, res, Endpoint::kCompletion); }},
      {"POST", "/v1/responses", "", kKey, kApi, [this](Req req, Res res) { openai_responses(req, res); }},
      {"GET", R"(/v1/responses/([^/]+))", "/v1/responses/{id}", kKey, kApi, [this](Req req, Res res) {
         auto stored = responses.get(req.matches[1]);
         if (!stored)
           return send_error(res, ApiError(404, fmt::format("Response with id '{}' not found.",
                                                            std::string(req.matches[1])),
                                           "invalid_request_error", "response_id", "not_found"));
         send_json(res, 200, stored->response);
       }},
      {"DELETE", R"(/v1/responses/([^/]+))", "/v1/responses/{id}", kKey, kApi, [this](Req req, Res res) {
         const std::string id = req.matches[1];
         if (!responses.remove(id))
           return send_error(res, ApiError(404, fmt::format("Response with id '{}' not found.", id),
                                           "invalid_request_error", "response_id", "not_found"));
         send_json(res, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
       }},
      {"POST", "/v1/messages", "", kKey, kApi, [this](Req req, Res res) { anthropic_messages(req, res); }},
      {"POST", "/v1/messages/count_tokens", "", kKey, kApi,
       [this](Req req, Res res) { anthropic_count_tokens(req, res); }},
      {"POST", "/v1/embeddings", "", kKey, kApi, [this](Req req, Res res) { embeddings(req, res); }},
      // llama-server's own endpoints (llama_api.h).
      {"POST", "/tokenize", "", kKey, kApi, [this](Req req, Res res) {
         answer(res, [&](const ServingContext& c) {
           return tokenize_response(parse_tokenize_request(req.body), *c.tokenizer);
         });
       }},
      {"POST", "/detokenize", "", kKey, kApi, [this](Req req, Res res) {
         answer(res, [&](const ServingContext& c) {
           return detokenize_response(parse_detokenize_request(req.body, c.tokenizer->n_vocab()),
                                      *c.tokenizer);
         });
       }},
      {"POST", "/apply-template", "", kKey, kApi, [this](Req req, Res res) {
         answer(res, [&](const ServingContext& c) { return apply_template_response(req.body, *c.chat); });
       }},
      {"GET", "/props", "", kKey, kApi, [this](Req, Res res) {
         answer(res, [&](const ServingContext& c) {
           return props_json(server_facts(c, opts.model_id, opts.version), c.engine->in_flight() > 0);
         });
       }},
      {"GET", "/slots", "", kKey, kApi, [this](Req, Res res) {
         answer(res, [&](const ServingContext& c) {
           if (!opts.slots)
             throw ApiError(501, "This server does not support slots endpoint (start it with --slots)",
                            "not_supported_error");
           return slots_json(c.engine->stats(), c.limits.max_context);
         });
       }},
      {"POST", "/infill", "", kKey, kApi, [this](Req req, Res res) {
         run_job(res, [&](const ServingContext& c) { return infill_job(req.body, c); });
       }},
  };
  if (opts.web_ui) {
    table.push_back({"GET", "/", "", kOpen, kPage, [serve_asset](Req, Res res) {
                        serve_asset(res, *find_web_asset("index.html"));
                      }});
    table.push_back({"GET", R"(/ui/([A-Za-z0-9_.-]+))", "/", kOpen, kPage, [serve_asset](Req req, Res res) {
                        const WebAsset* a = find_web_asset(std::string(req.matches[1]));
                        if (!a) {
                          res.status = 404;  // the error handler writes the JSON body
                          return;
                        }
                        serve_asset(res, *a);
                      }});
    table.push_back({"GET", "/favicon.ico", "", kOpen, kPage, [serve_asset](Req, Res res) {
                        serve_asset(res, *find_web_asset("favicon.svg"));
                      }});
  }

  routes = RouteTable(std::move(table));
  routes.install(svr, [](const std::string& allow) -> RouteHandler {
    return [allow](Req req, Res res) {
      res.set_header("Allow", allow);
      send_error(res, ApiError(405,
                               fmt::format("{} is not allowed on {} (use {})", req.method, req.path,
                                           allow),
                               "invalid_request_error"));
    };
  });
}

void HttpServer::Impl::serve_metrics(httplib::Response& res) {
  MetricsSnapshot snap;
  if (auto c = context()) {
    snap.ready = true;
    snap.engine = c->engine->stats();
    snap.requests_in_flight = c->engine->in_flight();
  }
  snap.version = opts.version;
  res.set_content(metrics.render(snap), "text/plain; version=0.0.4; charset=utf-8");
}

void HttpServer::Impl::completions(const httplib::Request& req, httplib::Response& res,
                                   Endpoint ep) {
  run_job(res, [&](const ServingContext& c) {
    CompletionJob job;
    job.request = parse_completion_request(req.body, ep);
    job.request.sampling = c.sampling_defaults.fill(job.request.sampling, job.request.sampling_given);
    job.prepared = prepare_completion(job.request, *c.tokenizer, *c.chat, c.limits);
    ResponseShape shape(ep, new_completion_id(ep), unix_now(), opts.model_id,
                        job.request.logprobs >= 0, job.request.include_usage);
    job.output = std::make_unique<OpenAiOutput>(std::move(shape), ep, job.request.include_usage);
    return job;
  });
}

void HttpServer::Impl::openai_responses(const httplib::Request& req, httplib::Response& res) {
  run_job(res, [&](const ServingContext& c) {
    ResponsesRequest rr = parse_responses_request(
        req.body, [this](const std::string& id) { return responses.get(id); });
    CompletionJob job;
    rr.chat.sampling = c.sampling_defaults.fill(rr.chat.sampling, rr.chat.sampling_given);
    rr.echo["temperature"] = rr.chat.sampling.temperature;  // the values used
    rr.echo["top_p"] = rr.chat.sampling.top_p;
    job.prepared = prepare_completion(rr.chat, *c.tokenizer, *c.chat, c.limits);
    cap_max_tokens(job.prepared, rr.max_output_tokens);
    job.output = std::make_unique<ResponsesOutput>(
        rr, opts.model_id, unix_now(),
        [this](const std::string& id, StoredResponse stored) { responses.put(id, std::move(stored)); });
    job.request = std::move(rr.chat);
    return job;
  });
}

void HttpServer::Impl::anthropic_messages(const httplib::Request& req, httplib::Response& res) {
  run_job(res, [&](const ServingContext& c) {
    AnthropicRequest ar = parse_anthropic_request(req.body, /*count_only=*/false);
    CompletionJob job;
    ar.chat.sampling = c.sampling_defaults.fill(ar.chat.sampling, ar.chat.sampling_given);
    job.prepared = prepare_completion(ar.chat, *c.tokenizer, *c.chat, c.limits);
    cap_max_tokens(job.prepared, ar.max_tokens);
    job.output = std::make_unique<AnthropicOutput>(opts.model_id);
    job.request = std::move(ar.chat);
    return job;
  });
}

void HttpServer::Impl::anthropic_count_tokens(const httplib::Request& req,
                                              httplib::Response& res) {
  auto c = ready_or_503(res);
  if (!c) return;
  try {
    AnthropicRequest ar = parse_anthropic_request(req.body, /*count_only=*/true);
    send_json(res, 200, {{"input_tokens", count_prompt_tokens(ar.chat, *c->tokenizer, *c->chat)}});
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

void HttpServer::Impl::embeddings(const httplib::Request& req, httplib::Response& res) {
  auto c = ready_or_503(res);
  if (!c) return;
  ++active;  // shutdown waits for it like a completion
  try {
    if (!c->embeddings)
      throw ApiError(400, "This server does not support embeddings. Start it with `--embeddings`",
                     "invalid_request_error", "", "embeddings_not_enabled");
    const EmbeddingsRequest er = parse_embeddings_request(req.body);
    std::vector<std::vector<int32_t>> inputs = prepare_embeddings(er, *c->tokenizer, c->limits);
    int64_t tokens = 0;
    for (const auto& ids : inputs) tokens += static_cast<int64_t>(ids.size());
    t_current.record.prompt_tokens = tokens;
    const auto vectors = run_embeddings(*c->engine, std::move(inputs), c->pooling);
    send_json(res, 200, embeddings_response(vectors, er.base64, opts.model_id, tokens));
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  --active;
}

CompletionJob HttpServer::Impl::infill_job(const std::string& body, const ServingContext& c) {
  InfillRequest ir = parse_infill_request(body);
  ir.completion.sampling = c.sampling_defaults.fill(ir.completion.sampling, ir.completion.sampling_given);
  const auto server = c.plan.find("server");
  const int64_t n_batch = server != c.plan.end() ? server->value("max_batched_tokens", 2048) : 2048;
  const std::vector<int32_t> prompt = infill_prompt(ir, *c.tokenizer, n_batch, c.limits.max_context);
  CompletionJob job;
  job.prepared = prepare_infill(ir, prompt, *c.tokenizer, *c.chat, c.limits);
  job.output = std::make_unique<LlamaCompletionOutput>(
      opts.model_id, c.tokenizer->decode(prompt, /*special=*/true), c.limits.max_context);
  job.request = std::move(ir.completion);
  return job;
}

void HttpServer::Impl::run_job(httplib::Response& res,
                               const std::function<CompletionJob(const ServingContext&)>& make) {
  const Clock::time_point received = t_current.started ? t_current.start : Clock::now();
  AccessRecord& rec = t_current.record;
  rec.completion = true;
  auto c = ready_or_503(res);
  if (!c) return;
  ++active;
  bool handed_to_stream = false;
  std::shared_ptr<CompletionSession> session;
  auto record_session = [&rec](const CompletionSession& s) {
    const Usage u = s.usage();
    rec.prompt_tokens = u.prompt_tokens;
    rec.completion_tokens = u.completion_tokens;
    rec.cached_tokens = u.cached_tokens;
    rec.ttft_s = s.ttft_seconds();
    rec.finish_reason = s.finish_reason();
  };
  try {
    CompletionJob job = make(*c);
    const bool streaming = job.request.stream;
    rec.stream = streaming;
    rec.id = job.output->id();
    res.set_header("X-Request-Id", rec.id);
    session = std::make_shared<CompletionSession>(*c->engine, *c->tokenizer, metrics, job.request,
                                                  std::move(job.prepared), std::move(job.output),
                                                  received);
    session->submit();
    if (streaming) {
      stream(session, c, res);
      handed_to_stream = true;
    } else {
      const ConnectionWatch watch(t_current.local_port, t_current.remote_addr, t_current.remote_port);
      std::optional<json> body = session->wait_all([&watch] { return watch.peer_closed(); });
      record_session(*session);
      if (body) {
        send_json(res, 200, *body);
      } else {
        // nginx's "client closed request": nobody reads it, the access log does.
        send_error(res, ApiError(499, "the client closed the connection", "invalid_request_error"));
        rec.error = "client disconnected";
      }
    }
  } catch (const ApiError& e) {
    if (session) record_session(*session);
    send_error(res, e);
  } catch (const std::exception& e) {
    if (session) record_session(*session);
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  if (!handed_to_stream) --active;
}

void HttpServer::Impl::stream(std::shared_ptr<CompletionSession> session,
                              std::shared_ptr<const ServingContext> c, httplib::Response& res) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  const auto ping = opts.stream_ping;
  res.set_chunked_content_provider(
      "text/event-stream",
      [session, ping](size_t, httplib::DataSink& sink) {
        bool done = false;
        std::string out = session->next_sse(ping, done);
        if (out.empty() && !done) out = sse_comment("waiting");
        AccessRecord& rec = t_current.record;
        const Usage u = session->usage();
        rec.prompt_tokens = u.prompt_tokens;
        rec.completion_tokens = u.completion_tokens;
        rec.cached_tokens = u.cached_tokens;
        rec.ttft_s = session->ttft_seconds();
        rec.finish_reason = session->finish_reason();
        if (!session->error().empty()) rec.error = session->error();
        if (!sink.write(out.data(), out.size())) {
          rec.error = "client disconnected";
          session->cancel();  // frees the request's KV blocks now
          return false;
        }
        if (done) sink.done();
        return true;
      },
      [this, session, c](bool) {
        session->cancel();  // no-op when the stream completed
        --active;
      });
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->setup();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind(const std::string& host, int port) {
  errno = 0;
  int bound = port;
  if (port == 0) {
    bound = impl_->svr.bind_to_any_port(host);
    if (bound < 0) bound = 0;
  } else if (!impl_->svr.bind_to_port(host, port)) {
    bound = 0;
  }
  if (bound <= 0) {
    // errno is the failed bind()'s or getaddrinfo's (e.g. "Address already in use").
    if (errno != 0) throw SystemError(errno_message(fmt::format("cannot listen on {}:{}", host, port), errno));
    throw SystemError(fmt::format("cannot listen on {}:{} (the address does not resolve)", host, port));
  }
  // httplib listens with a backlog of 5: a burst of new connections would
  // have SYNs dropped (and retried a second later). Raise it.
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, SOMAXCONN);
  impl_->port = bound;
  return bound;
}

void HttpServer::run() {
  impl_->run_entered = true;
  if (!impl_->stopping) impl_->svr.listen_after_bind();
  impl_->run_exited = true;
}

void HttpServer::set_ready(std::shared_ptr<const ServingContext> context) {
  std::lock_guard<std::mutex> lock(impl_->ctx_mu);
  impl_->ctx = std::move(context);
}

void HttpServer::begin_shutdown() {
  impl_->draining = true;
}

int HttpServer::active_requests() const {
  return impl_->active.load();
}

void HttpServer::stop() {
  impl_->stopping = true;
  // httplib's stop() does nothing until the listen loop runs: if run() has
  // been entered, wait for the loop to start (or for run() to give up).
  while (impl_->run_entered && !impl_->run_exited && !impl_->svr.is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->svr.stop();
  // The library's workers wait out idle keep-alive connections (2 s) before
  // they end, and listen() joins them: end those waits now.
  shut_accepted_connections(impl_->port);
}

ServerMetrics& HttpServer::metrics() {
  return impl_->metrics;
}

}  // namespace pagellm
