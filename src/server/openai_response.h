// OpenAI-compatible response bodies and stream chunks for /v1/chat/completions
// ("chat.completion", "chat.completion.chunk") and /v1/completions
// ("text_completion"), and errors ({"error": {...}}).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "server/openai_request.h"

namespace pagellm {

// One generated token's log-probability, with the most likely alternatives.
// Token texts are raw bytes (a token may hold part of a UTF-8 character).
struct LogprobItem {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;
  size_t text_offset = 0;  // bytes of the choice's text before this token
};

struct ToolCallResult {
  std::string id;  // "call_..."
  std::string name;
  std::string arguments;  // JSON text
};

struct ChoiceResult {
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;  // kStop, kLength or kToolCalls
  std::vector<LogprobItem> logprobs;
  // Calls found in the reply: the message's tool_calls (its content the text
  // outside them, null when empty).
  std::vector<ToolCallResult> tool_calls;
  // The stop string that ended the choice (finish reason "stop"); empty when
  // it ended otherwise (end of generation, length, tool calls).
  std::string stop_sequence;
  std::string reasoning;  // the thought split off the reply (reasoning templates)
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served by the prefix cache
};

class ResponseShape {
 public:
  ResponseShape(Endpoint endpoint, std::string id, int64_t created, std::string model,
                bool logprobs, bool include_usage);

  const std::string& id() const { return id_; }

  // The whole (non-streamed) response.
  nlohmann::ordered_json full(const std::vector<ChoiceResult>& choices, const Usage& usage) const;

  // Stream chunks. The chat stream opens each choice with a role chunk;
  // `finish_reason` kNone means null. A chunk ending a choice carries no text
  // in chat ("delta": {}).
  nlohmann::ordered_json role_chunk(int32_t index) const;
  nlohmann::ordered_json delta_chunk(int32_t index, const std::string& text,
                                     const std::vector<LogprobItem>& logprobs,
                                     FinishReason finish_reason) const;
  // A piece of the thought: {"delta": {"reasoning_content": ...}} (chat only).
  nlohmann::ordered_json reasoning_chunk(int32_t index, const std::string& text) const;
  // A choice's tool calls as stream chunks: per call, one chunk with its id,
  // name and empty arguments, then the arguments in pieces.
  std::vector<nlohmann::ordered_json> tool_call_chunks(int32_t index,
                                                       const std::vector<ToolCallResult>& calls) const;
  // The last chunk when stream_options.include_usage: no choices, the usage.
  nlohmann::ordered_json usage_chunk(const Usage& usage) const;

 private:
  nlohmann::ordered_json chunk_base() const;
  nlohmann::ordered_json logprobs_json(const std::vector<LogprobItem>& items) const;

  Endpoint endpoint_;
  std::string id_;
  int64_t created_;
  std::string model_;
  bool logprobs_;
  bool include_usage_;
};

nlohmann::ordered_json usage_json(const Usage& usage);
// A message's "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}].
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCallResult>& calls);
// {"error": {"message", "type", "param", "code"}}.
nlohmann::ordered_json error_json(const ApiError& e);
// Compact JSON; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::ordered_json& j);
std::string dump_json(const nlohmann::json& j);
// A fresh id: "chatcmpl-" or "cmpl-" followed by 24 hex digits.
std::string new_completion_id(Endpoint endpoint);
// A fresh id: `prefix` followed by 24 hex digits ("resp_", "msg_", ...).
std::string new_random_id(std::string_view prefix);

}  // namespace pagellm
