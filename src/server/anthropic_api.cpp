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

std::string string_in(const ojson& obj, const char* key, const std::string& where) {
  const ojson* v = json_field(obj, key);
  if (!v || !v->is_string()) bad(fmt::format("{}.{}: must be a string", where, key));
  return v->get<std::string>();
}

// A tool_result's content: a string, or text blocks.
std::string tool_result_text(const ojson& block, const std::string& where) {
  const ojson* content = json_field(block, "content");
  std::string text = content ? text_of(*content, where + ".content") : std::string();
  if (const ojson* e = json_field(block, "is_error"); e && *e == true) text = "Error: " + text;
  return text;
}

// Whether the last assistant turn in `messages` called `id`.
bool answers_a_call(const ojson& messages, const std::string& id) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if ((*it)["role"] == "tool") continue;
    if ((*it)["role"] != "assistant" || !it->contains("tool_calls")) return false;
    for (const auto& call : (*it)["tool_calls"])
      if (call["id"] == id) return true;
    return false;
  }
  return false;
}

// One Anthropic message as chat messages: text blocks joined; an assistant's
// tool_use blocks its tool_calls and thinking its reasoning_content; a
// user's tool_result blocks tool messages (before the user's text).
void add_message(const ojson& m, const std::string& w, ojson& messages) {
  const ojson* role = json_field(m, "role");
  if (!role || !role->is_string()) bad(fmt::format("{}.role: Field required", w));
  if (*role != "user" && *role != "assistant")
    bad(fmt::format("{}.role: must be 'user' or 'assistant', not '{}'", w, role->get<std::string>()));
  const bool assistant = *role == "assistant";
  const ojson* content = json_field(m, "content");
  if (!content) bad(fmt::format("{}.content: Field required", w));
  if (content->is_string()) {
    messages.push_back({{"role", *role}, {"content", *content}});
    return;
  }
  if (!content->is_array())
    bad(fmt::format("{}.content: must be a string or an array of content blocks, not {}", w,
                    json_kind(*content)));
  std::string text, thought;
  ojson calls = ojson::array();
  for (size_t k = 0; k < content->size(); ++k) {
    const ojson& block = (*content)[k];
    const std::string b = fmt::format("{}.content.{}", w, k);
    if (!block.is_object()) bad(fmt::format("{}: must be an object, not {}", b, json_kind(block)));
    const std::string type = string_in(block, "type", b);
    if (type == "text") {
      text += string_in(block, "text", b);
    } else if (type == "tool_use" && assistant) {
      const ojson* input = json_field(block, "input");
      if (!input || !input->is_object()) bad(fmt::format("{}.input: must be an object", b));
      calls.push_back({{"id", string_in(block, "id", b)},
                       {"type", "function"},
                       {"function", {{"name", string_in(block, "name", b)}, {"arguments", input->dump()}}}});
    } else if (type == "tool_result" && !assistant) {
      const std::string id = string_in(block, "tool_use_id", b);
      if (!answers_a_call(messages, id))
        bad(fmt::format("{}: tool_use_id '{}' matches no tool_use block of the previous assistant "
                        "message",
                        b, id));
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", id},
                          {"content", tool_result_text(block, b)}});
    } else if (type == "thinking" && assistant) {
      thought += string_in(block, "thinking", b);
    } else if (type == "redacted_thinking" && assistant) {
      // Encrypted by another server: nothing this model can read.
    } else {
      bad(fmt::format("{}: content blocks of type '{}' are not supported in {} messages (text{})", b,
                      type, role->get<std::string>(),
                      assistant ? ", tool_use and thinking are" : " and tool_result are"));
    }
  }
  if (assistant) {
    ojson msg = {{"role", "assistant"}, {"content", text}};
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    if (!thought.empty()) msg["reasoning_content"] = thought;
    messages.push_back(std::move(msg));
  } else if (!text.empty() || messages.empty() || messages.back()["role"] != "tool") {
    messages.push_back({{"role", "user"}, {"content", text}});
  }
}

// Anthropic tools ({name, description, input_schema}) as chat tools.
ojson chat_tools(const ojson& tools) {
  if (!tools.is_array()) bad(fmt::format("tools: must be an array, not {}", json_kind(tools)));
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string w = fmt::format("tools.{}", i);
    if (!t.is_object()) bad(fmt::format("{}: must be an object, not {}", w, json_kind(t)));
    if (const ojson* type = json_field(t, "type"); type && *type != "custom")
      bad(fmt::format("{}: tools of type {} are not supported (only client tools)", w, type->dump()));
    const ojson* schema = json_field(t, "input_schema");
    if (!schema || !schema->is_object()) bad(fmt::format("{}.input_schema: Field required (an object)", w));
    ojson fn = {{"name", string_in(t, "name", w)}, {"parameters", *schema}};
    if (const ojson* d = json_field(t, "description")) fn["description"] = *d;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// tool_choice {type: auto | any | tool | none} into the chat body.
void chat_tool_choice(const ojson& choice, ojson& chat) {
  if (!choice.is_object()) bad(fmt::format("tool_choice: must be an object, not {}", json_kind(choice)));
  const std::string type = string_in(choice, "type", "tool_choice");
  if (type == "auto") chat["tool_choice"] = "auto";
  else if (type == "any") chat["tool_choice"] = "required";
  else if (type == "none") chat["tool_choice"] = "none";
  else if (type == "tool")
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_in(choice, "name", "tool_choice")}}}};
  else
    bad(fmt::format("tool_choice.type: must be auto, any, tool or none, not '{}'", type));
  if (const ojson* d = json_field(choice, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) bad("tool_choice.disable_parallel_tool_use: must be a boolean");
    chat["parallel_tool_calls"] = !d->get<bool>();
  }
}

}  // namespace

AnthropicRequest parse_anthropic_request(const std::string& text, bool count_only) {
  const ojson body = parse_request_body<ojson>(text);

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
    add_message(m, w, messages);
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
  if (const ojson* t = json_field(body, "tools"); t && !(t->is_array() && t->empty()))
    chat["tools"] = chat_tools(*t);
  if (const ojson* c = json_field(body, "tool_choice")) chat_tool_choice(*c, chat);
  // Extended thinking turns the template's thinking switch (enable_thinking) on or off.
  if (const ojson* th = json_field(body, "thinking")) {
    const std::string type = th->is_object() ? string_in(*th, "type", "thinking") : "";
    if (type != "enabled" && type != "disabled")
      bad("thinking: must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": \"disabled\"}");
    chat["chat_template_kwargs"] = {{"enable_thinking", type == "enabled"}};
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
    // `grammar`: GBNF for the whole reply, the chat endpoints' extension.
    for (const char* key : {"top_p", "top_k", "stream", "grammar"})
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
  // As the request would run: tools, past thoughts and template variables rendered too.
  ModelLimits unlimited;
  unlimited.n_vocab = tokenizer.vocab().n_tokens();
  unlimited.max_context = std::numeric_limits<int64_t>::max();
  return prepare_completion(chat, tokenizer, prompt, unlimited).prompt_tokens.at(0);
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
  if (choice.finish_reason == FinishReason::kLength) return "max_tokens";
  if (choice.finish_reason == FinishReason::kToolCalls) return "tool_use";
  if (!choice.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

AnthropicOutput::AnthropicOutput(std::string model)
    : id_(new_random_id("msg_")), model_(std::move(model)) {}

std::string anthropic_tool_use_id(const std::string& call_id) {
  return "toolu_" + (call_id.rfind("call_", 0) == 0 ? call_id.substr(5) : call_id);
}

namespace {

ojson tool_input(const ToolCallResult& call) {
  try {
    ojson input = ojson::parse(call.arguments);
    if (input.is_object()) return input;
  } catch (const ojson::exception&) {
  }
  return ojson::object();  // the parser only returns calls whose arguments are an object
}

}  // namespace

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
  sse += sse_event("ping", {{"type", "ping"}});
  return sse;
}

std::string AnthropicOutput::open_block(const ojson& start) {
  std::string sse = close_block();
  open_type_ = start["type"].get<std::string>();
  sse += sse_event("content_block_start",
                   {{"type", "content_block_start"}, {"index", blocks_}, {"content_block", start}});
  return sse;
}

std::string AnthropicOutput::close_block() {
  if (open_type_.empty()) return "";
  open_type_.clear();
  return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", blocks_++}});
}

std::string AnthropicOutput::delta(const ojson& d) const {
  return sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", blocks_}, {"delta", d}});
}

std::string AnthropicOutput::stream_reasoning(int32_t, const std::string& text) {
  if (text.empty()) return "";
  std::string sse;
  if (open_type_ != "thinking")
    sse += open_block({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
  return sse + delta({{"type", "thinking_delta"}, {"thinking", text}});
}

std::string AnthropicOutput::stream_text(int32_t, const std::string& text,
                                         const std::vector<LogprobItem>&) {
  if (text.empty()) return "";
  std::string sse;
  if (open_type_ != "text") sse += open_block({{"type", "text"}, {"text", ""}});
  return sse + delta({{"type", "text_delta"}, {"text", text}});
}

std::string AnthropicOutput::stream_tool_calls(int32_t, const std::vector<ToolCallResult>& calls) {
  std::string sse;
  for (const auto& call : calls) {
    sse += open_block({{"type", "tool_use"},
                       {"id", anthropic_tool_use_id(call.id)},
                       {"name", call.name},
                       {"input", ojson::object()}});
    sse += delta({{"type", "input_json_delta"}, {"partial_json", tool_input(call).dump()}});
  }
  return sse + close_block();
}

std::string AnthropicOutput::stream_finish(int32_t, const ChoiceResult& choice) {
  result_ = choice;
  std::string sse;
  // A reply is at least one (possibly empty) text block.
  if (open_type_.empty() && blocks_ == 0) sse += open_block({{"type", "text"}, {"text", ""}});
  return sse + close_block();
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
  ojson content = ojson::array();
  if (!c.reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", c.reasoning}, {"signature", ""}});
  if (!c.text.empty() || c.tool_calls.empty()) content.push_back({{"type", "text"}, {"text", c.text}});
  for (const auto& call : c.tool_calls)
    content.push_back({{"type", "tool_use"},
                       {"id", anthropic_tool_use_id(call.id)},
                       {"name", call.name},
                       {"input", tool_input(call)}});
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", content},
          {"stop_reason", anthropic_stop_reason(c)},
          {"stop_sequence", c.stop_sequence.empty() ? ojson() : ojson(c.stop_sequence)},
          {"usage", {{"input_tokens", usage.prompt_tokens}, {"output_tokens", usage.completion_tokens}}}};
}

}  // namespace pagellm
