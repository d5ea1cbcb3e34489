// How a CompletionSession's results are written out: the whole response, or
// the events of a stream. The session (engine events, stop handling, tool
// call parsing, metrics) is the same for every API; only the wire format
// differs: OpenAI's Chat Completions and Completions (OpenAiOutput, over
// ResponseShape), the Responses API (responses_api.h) and Anthropic's
// Messages API (anthropic_api.h).
//
// A session calls the stream methods in this order: stream_begin once, then
// per choice any number of stream_reasoning / stream_text / stream_tool_calls and one
// stream_finish, then stream_end once (or stream_error once, at any point
// after stream_begin, when the request fails). Each returns the SSE text to
// send (possibly empty).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/openai_response.h"

namespace pagellm {

class SessionOutput {
 public:
  virtual ~SessionOutput() = default;

  virtual const std::string& id() const = 0;

  // `prompt`: the usage known before any token (prompt tokens only).
  virtual std::string stream_begin(size_t n_choices, const Usage& prompt) = 0;
  virtual std::string stream_text(int32_t index, const std::string& text,
                                  const std::vector<LogprobItem>& logprobs) = 0;
  virtual std::string stream_tool_calls(int32_t index, const std::vector<ToolCallResult>& calls) = 0;
  // A piece of the choice's thought (reasoning replies); it comes before its text.
  // Outputs without a place for it drop it.
  virtual std::string stream_reasoning(int32_t /*index*/, const std::string& /*text*/) { return ""; }
  // The choice is done: its whole text (outside tool calls), finish reason
  // and stop sequence.
  virtual std::string stream_finish(int32_t index, const ChoiceResult& choice) = 0;
  virtual std::string stream_end(const Usage& usage) = 0;
  virtual std::string stream_error(const ApiError& e) = 0;

  // The non-streamed response body.
  virtual nlohmann::ordered_json full(const std::vector<ChoiceResult>& choices,
                                      const Usage& usage) = 0;
};

// Chat Completions / Completions: "data: {chunk}" events and a final [DONE].
class OpenAiOutput : public SessionOutput {
 public:
  OpenAiOutput(ResponseShape shape, Endpoint endpoint, bool include_usage)
      : shape_(std::move(shape)), endpoint_(endpoint), include_usage_(include_usage) {}

  const std::string& id() const override { return shape_.id(); }
  std::string stream_begin(size_t n_choices, const Usage& prompt) override;
  std::string stream_text(int32_t index, const std::string& text,
                          const std::vector<LogprobItem>& logprobs) override;
  std::string stream_tool_calls(int32_t index, const std::vector<ToolCallResult>& calls) override;
  std::string stream_reasoning(int32_t index, const std::string& text) override;
  std::string stream_finish(int32_t index, const ChoiceResult& choice) override;
  std::string stream_end(const Usage& usage) override;
  std::string stream_error(const ApiError& e) override;
  nlohmann::ordered_json full(const std::vector<ChoiceResult>& choices,
                              const Usage& usage) override;

 private:
  ResponseShape shape_;
  Endpoint endpoint_;
  bool include_usage_;
};

}  // namespace pagellm
