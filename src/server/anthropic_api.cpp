#include "server/json_fields.h"
#include "server/anthropic_api.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t kMaxStopSequences = 16;

[[noreturn]] void bad(const std::string& message) {
  throw ApiError(400, message, "invalid_request_error");
}

// A string, or text blocks ({"type": "text", "text": ...}) joined.
std::string text_of(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad(fmt::format("{}: must be a string or an array of content blocks, not {}", where,
                    json_kind(content)));
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const ojson& block = content[k];
    const std::string w = fmt::format("{}.{}", where, k);
    if (!block.is_object()) bad(fmt::format("{}: must be an object, not {}", w, json_kind(block)));
    const ojson* type = json_field(block, "type");
    if (!type || !type->is_string()) bad(fmt::format("{}.type: Field required", w));
    if (*type != "text")
      bad(fmt::format("{}: content blocks of type '{}' are not supported (only text)", w,
                      type->get<std::string>()));
    const ojson* t = json_field(block, "text");
    if (!t || !t->is_string()) bad(fmt::format("{}.text: must be a string", w));
    text += t->get<std::string>();
  }
  return text;
}

}  // namespace

AnthropicRequest parse_anthropic_request(const std::string& text, bool count_only) {
  ojson body;
  try {
    body = ojson::parse(text);
  } catch (const ojson::exception& e) {
    bad(fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!body.is_object()) bad(fmt::format("the request body must be a JSON object, not {}", json_kind(body)));
  if (const ojson* t = json_field(body, "tools"); t && !(t->is_array() && t->empty()))
    bad("tools: tool use is not supported by this server");
  if (json_field(body, "tool_choice")) bad("tool_choice: tool use is not supported by this server");
  if (const ojson* th = json_field(body, "thinking");
      th && !(th->is_object() && th->contains("type") && (*th)["type"] == "disabled"))
    bad("thinking: extended thinking is not supported by this server");

  ojson messages = ojson::array();
  if (const ojson* system = json_field(body, "system")) {
    const std::string s = text_of(*system, "system");
    if (!s.empty()) messages.push_back({{"role", "system"}, {"content", s}});
  }
  const ojson* msgs = json_field(body, "messages");
  if (!msgs) bad("messages: Field required");
  if (!msgs->is_array()) bad(fmt::format("messages: must be an array, not {}", json_kind(*msgs)));
  if (msgs->empty()) bad("messages: at least one message is required");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string w = fmt::format("messages.{}", i);
    if (!m.is_object()) bad(fmt::format("{}: must be an object, not {}", w, json_kind(m)));
    const ojson* role = json_field(m, "role");
    if (!role || !role->is_string()) bad(fmt::format("{}.role: Field required", w));
    if (*role != "user" && *role != "assistant")
      bad(fmt::format("{}.role: must be 'user' or 'assistant', not '{}'", w,
                      role->get<std::string>()));
    const ojson* content = json_field(m, "content");
    if (!content) bad(fmt::format("{}.content: Field required", w));
    messages.push_back({{"role", *role}, {"content", text_of(*content, w + ".content")}});
  }
  // A final assistant turn asks the model to continue it; the chat template
  // would close it instead, so the reply would not be what the client meant.
  if (msgs->back()["role"] == "assistant" && !count_only)
    bad("messages: a final assistant message (prefill) is not supported; end with a user message");

  AnthropicRequest r;
  ojson chat = {{"messages", messages}};
  if (const ojson* m = json_field(body, "model")) {
    if (!m->is_string()) bad(fmt::format("model: must be a string, not {}", json_kind(*m)));
    chat["model"] = *m;
  }
  if (!count_only) {
    const ojson* mt = json_field(body, "max_tokens");
    if (!mt) bad("max_tokens: Field required");
    if (!mt->is_number_integer()) bad(fmt::format("max_tokens: must be an integer, not {}", json_kind(*mt)));
    // Non-negative JSON integers parse as unsigned: compare each kind as itself.
    const bool in_range =
        mt->is_number_unsigned()
            ? mt->get<uint64_t>() >= 1 &&
                  mt->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
            : mt->get<int64_t>() >= 1;
    if (!in_range)
      bad(fmt::format("max_tokens: must be in [1, {}] (got {})",
                      std::numeric_limits<int32_t>::max(), mt->dump()));
    r.max_tokens = mt->get<int64_t>();
    if (const ojson* t = json_field(body, "temperature")) {
      // Anthropic's range is [0, 1] (OpenAI's is [0, 2]).
      if (!t->is_number() || !std::isfinite(t->get<double>()) || t->get<double>() < 0 ||
          t->get<double>() > 1)
        bad(fmt::format("temperature: must be a number in [0, 1] (got {})", t->dump()));
      chat["temperature"] = *t;
    }
    for (const char* key : {"top_p", "top_k", "stream"})
      if (const ojson* v = json_field(body, key)) chat[key] = *v;
    if (const ojson* stops = json_field(body, "stop_sequences")) {
      if (!stops->is_array())
        bad(fmt::format("stop_sequences: must be an array of strings, not {}", json_kind(*stops)));
      if (stops->size() > kMaxStopSequences)
        bad(fmt::format("stop_sequences: at most {} are allowed (got {})", kMaxStopSequences,
                        stops->size()));
      for (const ojson& s : *stops)
        if (!s.is_string() || s.get<std::string>().empty())
          bad("stop_sequences: each must be a non-empty string");
      if (!stops->empty()) chat["stop"] = *stops;
    }
  }
  try {
    r.chat = parse_translated_chat(chat, {});
  } catch (const ApiError& e) {
    // Anthropic's errors have no param or code: the message names the field.
    throw ApiError(e.status, e.what(), "invalid_request_error");
  }
  return r;
}

int64_t count_prompt_tokens(const CompletionRequest& chat, const Tokenizer& tokenizer,
                            const ChatPrompt& prompt) {
  const RenderedPrompt rendered = prompt.render(chat.messages);
  return static_cast<int64_t>(
      tokenizer.encode(rendered.text, /*add_special=*/rendered.add_bos, /*parse_special=*/true)
          .size());
}

ojson anthropic_error_json(const ApiError& e) {
  const char* type;
  switch (e.status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 405: type = "invalid_request_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503:
    case 529: type = "overloaded_error"; break;
    default: type = e.status < 500 ? "invalid_request_error" : "api_error";
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

std::string anthropic_stop_reason(const ChoiceResult& choice) {
  if (choice.finish_reason == "length") return "max_tokens";
  if (choice.finish_reason == "tool_calls") return "tool_use";
  if (!choice.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

AnthropicOutput::AnthropicOutput(std::string model)
    : id_(new_random_id("msg_")), model_(std::move(model)) {}

std::string AnthropicOutput::stream_begin(size_t, const Usage& prompt) {
  ojson message = {{"id", id_},
                   {"type", "message"},
                   {"role", "assistant"},
                   {"model", model_},
                   {"content", ojson::array()},
                   {"stop_reason", nullptr},
                   {"stop_sequence", nullptr},
                   {"usage", {{"input_tokens", prompt.prompt_tokens}, {"output_tokens", 0}}}};
  std::string sse = sse_event("message_start", {{"type", "message_start"}, {"message", message}});
  sse += sse_event("content_block_start", {{"type", "content_block_start"},
                                           {"index", 0},
                                           {"content_block", {{"type", "text"}, {"text", ""}}}});
  sse += sse_event("ping", {{"type", "ping"}});
  return sse;
}

std::string AnthropicOutput::stream_text(int32_t, const std::string& text,
                                         const std::vector<LogprobItem>&) {
  if (text.empty()) return "";
  return sse_event("content_block_delta", {{"type", "content_block_delta"},
                                           {"index", 0},
                                           {"delta", {{"type", "text_delta"}, {"text", text}}}});
}

std::string AnthropicOutput::stream_tool_calls(int32_t, const std::vector<ToolCallResult>&) {
  return "";  // requests never carry tools (refused by the parser)
}

std::string AnthropicOutput::stream_finish(int32_t, const ChoiceResult& choice) {
  result_ = choice;
  return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
}

std::string AnthropicOutput::stream_end(const Usage& usage) {
  std::string sse = sse_event(
      "message_delta",
      {{"type", "message_delta"},
       {"delta",
        {{"stop_reason", anthropic_stop_reason(result_)},
         {"stop_sequence",
          result_.stop_sequence.empty() ? ojson() : ojson(result_.stop_sequence)}}},
       {"usage", {{"output_tokens", usage.completion_tokens}}}});
  sse += sse_event("message_stop", {{"type", "message_stop"}});
  return sse;
}

std::string AnthropicOutput::stream_error(const ApiError& e) {
  return sse_event("error", anthropic_error_json(e));
}

ojson AnthropicOutput::full(const std::vector<ChoiceResult>& choices, const Usage& usage) {
  const ChoiceResult& c = choices.at(0);
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", ojson::array({{{"type", "text"}, {"text", c.text}}})},
          {"stop_reason", anthropic_stop_reason(c)},
          {"stop_sequence", c.stop_sequence.empty() ? ojson() : ojson(c.stop_sequence)},
          {"usage", {{"input_tokens", usage.prompt_tokens}, {"output_tokens", usage.completion_tokens}}}};
}

}  // namespace pagellm
