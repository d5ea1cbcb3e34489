// One completion request in flight: its engine requests (one per prompt, each
// with n samples), the events coming back, and what they become: a whole
// response, or the events of an SSE stream, in the wire format of the
// SessionOutput it is given. Also feeds the latency metrics.
//
// Choice i of prompt p has index p x n + i. A choice that ends in "error" or
// "abort" fails the whole request: a non-streamed one with an ApiError (400
// when the engine refused a request before any token, 503 when the server
// aborted it while shutting down, 500 otherwise), a stream with an error
// event ({"error": {...}}) followed by [DONE].
//
// Used by one HTTP thread at a time. Destroying a session that has not
// finished aborts its engine requests (their KV blocks are freed at once).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "server/metrics.h"
#include "server/openai_response.h"
#include "server/reasoning.h"
#include "server/session_output.h"

namespace pagellm {

class Tokenizer;

class CompletionSession {
 public:
  using Clock = std::chrono::steady_clock;

  CompletionSession(AsyncEngine& engine, const Tokenizer& tokenizer, ServerMetrics& metrics,
                    const CompletionRequest& request, PreparedCompletion prepared,
                    std::unique_ptr<SessionOutput> output, Clock::time_point received);
  ~CompletionSession();
  CompletionSession(const CompletionSession&) = delete;
  CompletionSession& operator=(const CompletionSession&) = delete;

  // Hands every engine request to the engine. Throws ApiError 503 when the
  // queue is full or the server is shutting down (what was already submitted
  // is cancelled).
  void submit();

  // Non-streamed: waits for every choice and returns the response body;
  // nullopt, with the engine requests aborted, once `abandoned` (asked a
  // few times a second) says the client has gone.
  std::optional<nlohmann::ordered_json> wait_all(const std::function<bool()>& abandoned = {});

  // Streamed: waits up to `wait` for events and returns the SSE text they
  // make (empty if none came). `done` turns true with the text that ends the
  // stream ([DONE] included).
  std::string next_sse(std::chrono::milliseconds wait, bool& done);

  // Aborts the engine requests that have not finished (the client went away).
  void cancel();
  bool finished() const { return finished_; }

  // For the access log.
  Usage usage() const;
  double ttft_seconds() const;        // < 0 before the first token
  std::string finish_reason() const;  // the first choice's ("stop", "length", "tool_calls") or the failure's
  const std::string& error() const { return error_; }

 private:
  struct Choice {
    std::vector<ToolCallResult> tool_calls;  // found in the reply (tools given)
    std::string text;
    std::string reasoning;
    std::unique_ptr<ReplySplitter> splitter;  // reasoning replies
    std::string stop_sequence;  // the stop string that ended it (SeqEvent::stop_index)
    std::vector<LogprobItem> logprobs;  // all of them (non-streamed)
    std::vector<LogprobItem> unsent;    // not yet in a chunk (streamed)
    bool finished = false;
    FinishReason finish_reason = FinishReason::kNone;
    int64_t generated = 0;
    bool has_token = false;
    Clock::time_point last_token;
  };
  struct Event {
    size_t request;
    SeqEvent ev;
  };

  std::vector<Event> poll(std::chrono::milliseconds wait);
  // Applies one event; returns the stream chunks it makes when `streaming`.
  void apply(const Event& e, bool streaming, std::string& sse);
  void fail(const SeqEvent& ev);
  ApiError failure() const;

  AsyncEngine& engine_;
  const Tokenizer& tokenizer_;
  ServerMetrics& metrics_;
  // Moves the calls in c's reply into c.tool_calls (finish reason tool_calls).
  void find_tool_calls(Choice& c);
  ChoiceResult result_of(const Choice& c) const;  // without logprobs
  PreparedCompletion prepared_;
  std::unique_ptr<SessionOutput> out_;
  bool ignore_eos_;
  std::vector<std::string> stop_;
  int32_t n_;
  Clock::time_point received_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<Choice> choices_;
  std::vector<int64_t> cached_;  // per request
  size_t open_requests_ = 0;  // engine requests without their last event (SeqEvent::request_finished)
  bool submitted_ = false;
  bool cancelled_ = false;
  bool started_stream_ = false;
  bool finished_ = false;
  bool failed_ = false;
  std::string fail_reason_;  // "error" or "abort"
  std::string error_;
  bool refused_ = false;  // the engine refused a request before any token
  double ttft_ = -1.0;
};

}  // namespace pagellm
