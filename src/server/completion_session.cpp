#include "server/completion_session.h"

#include <algorithm>

#include <fmt/format.h>

#include "server/harmony.h"
#include "server/sse.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

namespace {

double seconds(CompletionSession::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

CompletionSession::CompletionSession(AsyncEngine& engine, const Tokenizer& tokenizer,
                                     ServerMetrics& metrics, const CompletionRequest& request,
                                     PreparedCompletion prepared,
                                     std::unique_ptr<SessionOutput> output,
                                     Clock::time_point received)
    : engine_(engine),
      tokenizer_(tokenizer),
      metrics_(metrics),
      prepared_(std::move(prepared)),
      out_(std::move(output)),
      ignore_eos_(request.ignore_eos),
      stop_(request.stop),
      n_(request.n),
      received_(received),
      choices_(prepared_.requests.size() * static_cast<size_t>(request.n)),
      cached_(prepared_.requests.size(), 0),
      open_requests_(prepared_.requests.size()) {
  for (auto& c : choices_) {
    if (prepared_.harmony)
      c.splitter = std::make_unique<HarmonySplitter>();
    else if (prepared_.think)
      c.splitter = std::make_unique<ReasoningSplitter>(*prepared_.think, prepared_.thought_open_in_prompt,
                                                       prepared_.keep_thought_in_content);
  }
}

CompletionSession::~CompletionSession() {
  cancel();
}

void CompletionSession::submit() {
  for (auto& r : prepared_.requests) {
    try {
      streams_.push_back(engine_.submit(std::move(r)));
    } catch (const QueueFullError& e) {
      cancel();
      const bool closing = std::string(e.what()).find("shutting down") != std::string::npos;
      throw ApiError(503,
                     closing ? "the server is shutting down"
                             : std::string("the server is busy: ") + e.what() + "; retry later",
                     "server_error", "", closing ? "shutting_down" : "queue_full");
    }
  }
  prepared_.requests.clear();
  submitted_ = true;
}

void CompletionSession::cancel() {
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& s : streams_)
    if (!s->finished()) s->cancel();
  if (!submitted_ || finished_) return;
  for (auto& c : choices_)
    if (!c.finished) {
      c.finished = true;
      metrics_.count_finish("abort");
    }
}

std::vector<CompletionSession::Event> CompletionSession::poll(std::chrono::milliseconds wait) {
  std::vector<Event> out;
  size_t open = 0, first_open = streams_.size();
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (streams_[i]->finished()) continue;
    ++open;
    if (first_open == streams_.size()) first_open = i;
    while (auto ev = streams_[i]->next(std::chrono::milliseconds(0)))
      out.push_back({i, std::move(*ev)});
  }
  if (!out.empty() || open == 0) return out;
  // Nothing ready: block on one stream (on all of them in turn when there are several).
  const auto step = open == 1 ? wait : std::min(wait, std::chrono::milliseconds(2));
  if (auto ev = streams_[first_open]->next(step)) out.push_back({first_open, std::move(*ev)});
  return out;
}

void CompletionSession::fail(const SeqEvent& ev) {
  failed_ = true;
  fail_reason_ = finish_reason_name(ev.finish_reason);
  error_ = ev.error.empty() ? "the request was aborted" : ev.error;
  refused_ = ev.finish_reason == FinishReason::kError && ttft_ < 0;
  metrics_.count_finish(finish_reason_name(ev.finish_reason));
  cancel();
}

ApiError CompletionSession::failure() const {
  if (fail_reason_ == "abort")
    return ApiError(503, "the request was aborted: the server is shutting down", "server_error", "",
                    "aborted");
  if (refused_) return ApiError(400, error_, "invalid_request_error");
  return ApiError(500, error_, "server_error");
}

void CompletionSession::apply(const Event& e, bool streaming, std::string& sse) {
  const SeqEvent& ev = e.ev;
  if (failed_ || ev.index < 0 || ev.index >= n_) return;
  const size_t ci = e.request * static_cast<size_t>(n_) + static_cast<size_t>(ev.index);
  Choice& c = choices_[ci];
  if (c.finished) return;
  if (ev.finished && ev.finish_reason != FinishReason::kStop &&
      ev.finish_reason != FinishReason::kLength) {
    c.finished = true;
    fail(ev);
    return;
  }
  const auto now = Clock::now();
  if (ev.token >= 0) {
    if (ttft_ < 0) {
      ttft_ = seconds(now - received_);
      metrics_.ttft.observe(ttft_);
    }
    if (c.has_token) metrics_.inter_token.observe(seconds(now - c.last_token));
    c.has_token = true;
    c.last_token = now;
    // The end-of-generation token that stopped the choice is not part of its output.
    const bool final_eog =
        ev.finished && ev.finish_reason == FinishReason::kStop && !ignore_eos_ && tokenizer_.is_eog(ev.token);
    if (ev.has_logprob && !final_eog) {
      LogprobItem item;
      item.token = tokenizer_.token_to_piece(ev.token, /*special=*/true);
      item.logprob = ev.logprob;
      item.text_offset = c.text.size();
      for (const auto& t : ev.top_logprobs)
        item.top.emplace_back(tokenizer_.token_to_piece(t.token, /*special=*/true), t.logprob);
      (streaming ? c.unsent : c.logprobs).push_back(std::move(item));
    }
  }
  std::string text = ev.text, thought;
  if (c.splitter) {
    ReplySplitter::Delta d = c.splitter->push(ev.text);
    if (ev.finished) {
      ReplySplitter::Delta last = c.splitter->finish();
      d.reasoning += last.reasoning;
      d.content += last.content;
    }
    text = std::move(d.content);
    thought = std::move(d.reasoning);
  }
  c.text += text;
  c.reasoning += thought;
  c.generated = std::max(c.generated, ev.generated_tokens);
  const int32_t index = static_cast<int32_t>(ci);
  // The thought streams as it comes, also before a tool call.
  if (streaming && !thought.empty()) sse += out_->stream_reasoning(index, thought);
  // With tools the reply may be a call: it goes out whole once finished.
  const bool hold = prepared_.parse_tools;
  if (streaming && !hold && (!text.empty() || (ev.finished && !c.unsent.empty()))) {
    sse += out_->stream_text(index, text, c.unsent);
    c.unsent.clear();
  }
  if (!ev.finished) return;
  c.finished = true;
  c.finish_reason = ev.finish_reason;
  c.generated = ev.generated_tokens;
  if (ev.index == 0) cached_[e.request] = ev.cached_prompt_tokens;
  if (ev.stop_index >= 0 && static_cast<size_t>(ev.stop_index) < stop_.size())
    c.stop_sequence = stop_[static_cast<size_t>(ev.stop_index)];
  if (hold) {
    find_tool_calls(c);
    if (streaming) {
      if (!c.tool_calls.empty()) {
        sse += out_->stream_tool_calls(index, c.tool_calls);
      } else if (!c.text.empty() || !c.unsent.empty()) {
        sse += out_->stream_text(index, c.text, c.unsent);
        c.unsent.clear();
      }
    }
  }
  metrics_.count_finish(finish_reason_name(c.finish_reason));
  if (streaming) sse += out_->stream_finish(index, result_of(c));
  if (ev.request_finished && --open_requests_ == 0) {
    finished_ = true;
    metrics_.e2e.observe(seconds(now - received_));
  }
}

std::optional<nlohmann::ordered_json> CompletionSession::wait_all(
    const std::function<bool()>& abandoned) {
  std::string unused;
  while (!finished_ && !failed_) {
    for (const Event& e : poll(std::chrono::milliseconds(100))) apply(e, false, unused);
    if (!finished_ && !failed_ && abandoned && abandoned()) {
      cancel();  // frees the requests' KV blocks now
      return std::nullopt;
    }
  }
  if (failed_) throw failure();
  std::vector<ChoiceResult> results;
  results.reserve(choices_.size());
  for (auto& c : choices_) {
    ChoiceResult r = result_of(c);
    r.logprobs = std::move(c.logprobs);
    results.push_back(std::move(r));
  }
  return out_->full(results, usage());
}

std::string CompletionSession::next_sse(std::chrono::milliseconds wait, bool& done) {
  std::string sse;
  done = false;
  if (!started_stream_) {
    started_stream_ = true;
    Usage prompt;
    for (int64_t p : prepared_.prompt_tokens) prompt.prompt_tokens += p;
    sse += out_->stream_begin(choices_.size(), prompt);
  }
  if (!finished_ && !failed_)
    for (const Event& e : poll(sse.empty() ? wait : std::chrono::milliseconds(0)))
      apply(e, true, sse);
  if (failed_) {
    sse += out_->stream_error(failure());
    done = true;
  } else if (finished_) {
    sse += out_->stream_end(usage());
    done = true;
  }
  return sse;
}

void CompletionSession::find_tool_calls(Choice& c) {
  std::string content = c.text;
  // Harmony carries calls in a channel of their own; other formats in the answer.
  const auto calls = prepared_.harmony && c.splitter
                         ? known_calls(c.splitter->tool_calls(), prepared_.tools)
                         : parse_tool_calls(prepared_.tool_format, c.text, prepared_.tools, content);
  if (calls.empty()) return;
  for (const auto& call : calls)
    // Clients match tool results to calls by id across requests: 96 random bits.
    c.tool_calls.push_back({new_random_id("call_"), call.name, call.arguments});
  c.text = content;
  c.finish_reason = FinishReason::kToolCalls;
}

ChoiceResult CompletionSession::result_of(const Choice& c) const {
  return ChoiceResult{.text = c.text,
                      .finish_reason = c.finish_reason,
                      .tool_calls = c.tool_calls,
                      .stop_sequence = c.stop_sequence,
                      .reasoning = c.reasoning};
}

Usage CompletionSession::usage() const {
  Usage u;
  for (int64_t p : prepared_.prompt_tokens) u.prompt_tokens += p;
  for (const auto& c : choices_) u.completion_tokens += c.generated;
  for (int64_t c : cached_) u.cached_tokens += c;
  return u;
}

double CompletionSession::ttft_seconds() const {
  return ttft_;
}

std::string CompletionSession::finish_reason() const {
  if (failed_) return fail_reason_;
  return choices_.empty() ? "" : finish_reason_name(choices_.front().finish_reason);
}

}  // namespace pagellm
