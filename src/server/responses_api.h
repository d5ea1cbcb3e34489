// OpenAI's Responses API (POST /v1/responses): the request becomes a Chat
// Completions request (so sampling, `text.format` json_schema and function
// tools go through the chat parser, grammar and tool-call machinery), and
// ResponsesOutput writes the session's results as a response object or as
// the Responses stream events (response.created ... response.completed,
// each with a sequence_number).
//
// Input: a string, or items: messages (role user, assistant, system or
// developer; content a string or input_text / output_text parts),
// function_call and function_call_output items, and reasoning items (their
// text reaches the template as the next assistant turn's reasoning_content).
// A reasoning template's thought is a `reasoning` output item (content
// reasoning_text) before the message or calls; streamed as
// response.reasoning_text.delta / .done. `instructions` become a
// system message that a continuation does not inherit; `previous_response_id`
// prepends the stored conversation of an earlier response (ResponseStore).
// `max_output_tokens` is an upper bound (the context caps it).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/openai_request.h"
#include "server/response_store.h"
#include "server/session_output.h"

namespace pagellm {

struct ResponsesRequest {
  CompletionRequest chat;                 // what the engine runs (chat endpoint)
  std::optional<int64_t> max_output_tokens;
  nlohmann::ordered_json conversation;    // chat messages without the instructions
  std::string previous_response_id;       // empty: none
  bool store = true;
  // The request's settings as the response object repeats them
  // (instructions, metadata, temperature, text, tools, ...).
  nlohmann::ordered_json echo;
};

// Looks a stored response up by id; nullopt when unknown.
using ResponseLookup = std::function<std::optional<StoredResponse>(const std::string&)>;

// Throws ApiError: 400 for malformed or unsupported input (OpenAI's shape,
// param named as in the Responses API), 404 "previous_response_not_found"
// when previous_response_id is unknown.
ResponsesRequest parse_responses_request(const std::string& body, const ResponseLookup& lookup);

// Called with the finished response (status completed or incomplete) and
// the conversation including the reply, when the request asked to store it.
using ResponseSaver = std::function<void(const std::string& id, StoredResponse stored)>;

class ResponsesOutput : public SessionOutput {
 public:
  ResponsesOutput(const ResponsesRequest& request, std::string model, int64_t created_at,
                  ResponseSaver saver);

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
  // The response object; `output` the items so far, `status` in_progress,
  // completed, incomplete or failed.
  nlohmann::ordered_json response(const std::string& status, const nlohmann::ordered_json& output,
                                  const Usage* usage) const;
  std::string event(const char* type, nlohmann::ordered_json payload);
  nlohmann::ordered_json message_item(const std::string& text, const char* status) const;
  nlohmann::ordered_json function_call_item(const ToolCallResult& call, const char* status) const;
  nlohmann::ordered_json reasoning_item(const std::string& text, const char* status) const;
  std::string open_message();
  // Ends the reasoning item of the stream, if one is open.
  std::string close_reasoning();
  void save(const nlohmann::ordered_json& response, const ChoiceResult& choice);

  std::string id_, message_id_, reasoning_id_, model_;
  int64_t created_at_;
  nlohmann::ordered_json echo_, conversation_;
  std::string previous_response_id_;
  bool store_;
  ResponseSaver saver_;
  // Stream state.
  int64_t sequence_ = 0;
  bool message_open_ = false;
  bool reasoning_open_ = false;
  std::string reasoning_;  // the streamed thought so far
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();  // finished items
  ChoiceResult result_;
};

// {"input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens"}.
nlohmann::ordered_json responses_usage_json(const Usage& usage);

}  // namespace pagellm
