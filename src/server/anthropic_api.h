// Anthropic's Messages API (POST /v1/messages, POST /v1/messages/count_tokens).
//
// The request becomes a Chat Completions request (the chat parser, template
// and sampling do the rest); AnthropicOutput writes the session's results as
// a "message" object or as Anthropic's stream (message_start,
// content_block_start, ping, content_block_delta, content_block_stop,
// message_delta, message_stop). Errors have Anthropic's shape:
// {"type": "error", "error": {"type": "invalid_request_error", "message": ...}}.
//
// Content: text blocks; tool_use and thinking blocks in assistant turns,
// tool_result blocks in user turns (images and documents are refused with a
// 400). Client `tools` ({name, description, input_schema}) and `tool_choice`
// (auto, any, tool, none; disable_parallel_tool_use) go through the chat
// tool machinery; calls come back as tool_use blocks (ids "toolu_..."),
// streamed as input_json_delta, with stop_reason "tool_use". `thinking`
// enabled/disabled sets the template's enable_thinking; a reasoning
// template's thought comes back as a thinking block (thinking_delta).
// `max_tokens` is required and is an upper bound (the context caps it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/openai_request.h"
#include "server/session_output.h"

namespace pagellm {

class Tokenizer;

struct AnthropicRequest {
  CompletionRequest chat;  // what the engine runs (chat endpoint, no max_tokens)
  int64_t max_tokens = 0;  // 0 for count_tokens
};

// Throws ApiError (400) for malformed or unsupported input. `count_only`:
// the count_tokens body (no max_tokens, no sampling).
AnthropicRequest parse_anthropic_request(const std::string& body, bool count_only);

// The prompt's tokens as the model sees them (the chat template applied).
int64_t count_prompt_tokens(const CompletionRequest& chat, const Tokenizer& tokenizer,
                            const ChatPrompt& prompt);

// Anthropic's error object; its type follows the HTTP status
// (400 invalid_request_error, 401 authentication_error, 404 not_found_error,
// 413 request_too_large, 429 rate_limit_error, 503 overloaded_error,
// 500 api_error, ...).
nlohmann::ordered_json anthropic_error_json(const ApiError& e);

// A tool_use id for a call id: "call_X" -> "toolu_X".
std::string anthropic_tool_use_id(const std::string& call_id);

// stop_reason: end_turn, max_tokens, stop_sequence or tool_use.
std::string anthropic_stop_reason(const ChoiceResult& choice);

class AnthropicOutput : public SessionOutput {
 public:
  explicit AnthropicOutput(std::string model);

  const std::string& id() const override { return id_; }
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
  // Content blocks open one at a time, in order: thinking, text, tool_use.
  std::string open_block(const nlohmann::ordered_json& start);
  std::string close_block();
  std::string delta(const nlohmann::ordered_json& d) const;

  std::string id_, model_;
  ChoiceResult result_;
  int blocks_ = 0;         // index of the open (or next) block
  std::string open_type_;  // empty: none open
};

}  // namespace pagellm
