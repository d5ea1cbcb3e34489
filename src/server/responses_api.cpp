#include "server/json_fields.h"
#include "server/responses_api.h"

#include <fmt/format.h>

#include <limits>

#include "server/sse.h"

namespace pagellm {

namespace {

using ojson = nlohmann::ordered_json;

std::string string_field(const ojson& obj, const char* key, const std::string& param) {
  const ojson* v = json_field(obj, key);
  if (!v) bad_request(param, fmt::format("'{}' is required", param));
  if (!v->is_string())
    bad_request(param, fmt::format("'{}' must be a string, not {}", param, json_kind(*v)));
  return v->get<std::string>();
}

// A message's content: a string, or input_text / output_text parts.
std::string content_text(const ojson& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request(param, fmt::format("'{}' must be a string or an array of content parts, not {}",
                                   param, json_kind(content)));
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const ojson& part = content[k];
    const std::string pp = fmt::format("{}[{}]", param, k);
    if (!part.is_object())
      bad_request(pp, fmt::format("'{}' must be an object, not {}", pp, json_kind(part)));
    const std::string type = string_field(part, "type", pp + ".type");
    if (type != "input_text" && type != "output_text" && type != "text")
      bad_request(pp,
                  fmt::format("content parts of type '{}' are not supported (only input_text and "
                              "output_text)",
                              type),
                  "unsupported_content");
    text += string_field(part, "text", pp + ".text");
  }
  return text;
}

// The text of a reasoning input item: its reasoning_text content, else its summary.
std::string reasoning_text_of(const ojson& item, const std::string& p) {
  std::string text;
  for (const char* key : {"content", "summary"}) {
    const ojson* parts = json_field(item, key);
    if (!parts) continue;
    if (!parts->is_array())
      bad_request(p + "." + key,
                  fmt::format("'{}.{}' must be an array, not {}", p, key, json_kind(*parts)));
    for (size_t k = 0; k < parts->size(); ++k)
      text += string_field((*parts)[k], "text", fmt::format("{}.{}[{}].text", p, key, k));
    if (!text.empty()) break;
  }
  return text;
}

// Appends the input's items to `messages` as Chat Completions messages.
void add_input(const ojson& input, ojson& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return;
  }
  if (!input.is_array())
    bad_request("input", fmt::format("'input' must be a string or an array of items, not {}",
                                     json_kind(input)));
  if (input.empty()) bad_request("input", "'input' must not be empty");
  std::string thought;  // a reasoning item's, for the assistant turn after it
  auto with_thought = [&thought](ojson m) {
    if (!thought.empty()) m["reasoning_content"] = thought;
    thought.clear();
    return m;
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    const std::string p = fmt::format("input[{}]", i);
    if (!item.is_object())
      bad_request(p, fmt::format("'{}' must be an object, not {}", p, json_kind(item)));
    std::string type = "message";
    if (json_field(item, "type")) type = string_field(item, "type", p + ".type");
    if (type == "message") {
      std::string role = string_field(item, "role", p + ".role");
      if (role == "developer") role = "system";
      if (role != "user" && role != "assistant" && role != "system")
        bad_request(p + ".role",
                    fmt::format("unknown role '{}' in {} (expected user, assistant, system or "
                                "developer)",
                                role, p));
      const ojson* content = json_field(item, "content");
      if (!content) bad_request(p + ".content", fmt::format("{} has no content", p));
      ojson m = {{"role", role}, {"content", content_text(*content, p + ".content")}};
      messages.push_back(role == "assistant" ? with_thought(std::move(m)) : std::move(m));
    } else if (type == "function_call") {
      ojson call = {{"id", string_field(item, "call_id", p + ".call_id")},
                    {"type", "function"},
                    {"function",
                     {{"name", string_field(item, "name", p + ".name")},
                      {"arguments", string_field(item, "arguments", p + ".arguments")}}}};
      // Calls in a row are one assistant turn.
      if (!messages.empty() && messages.back()["role"] == "assistant" &&
          messages.back().contains("tool_calls"))
        messages.back()["tool_calls"].push_back(std::move(call));
      else
        messages.push_back(with_thought(
            {{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array({call})}}));
    } else if (type == "function_call_output") {
      const ojson* out = json_field(item, "output");
      if (!out) bad_request(p + ".output", fmt::format("'{}.output' is required", p));
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_field(item, "call_id", p + ".call_id")},
                          {"content", out->is_string() ? out->get<std::string>()
                                                       : content_text(*out, p + ".output")}});
    } else if (type == "reasoning") {
      thought += reasoning_text_of(item, p);
    } else {
      bad_request(p,
                  fmt::format("input items of type '{}' are not supported (message, function_call, "
                              "function_call_output and reasoning are)",
                              type),
                  "unsupported_input");
    }
  }
}

// `text.format` as the chat parser's response_format.
ojson response_format(const ojson& text) {
  if (!text.is_object())
    bad_request("text", fmt::format("'text' must be an object, not {}", json_kind(text)));
  const ojson* format = json_field(text, "format");
  if (!format) return nullptr;
  if (!format->is_object())
    bad_request("text.format",
                fmt::format("'text.format' must be an object, not {}", json_kind(*format)));
  const std::string type = string_field(*format, "type", "text.format.type");
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    bad_request("text.format",
                fmt::format("'text.format' type must be text, json_object or json_schema, "
                            "not '{}'",
                            type));
  const ojson* schema = json_field(*format, "schema");
  if (!schema) bad_request("text.format", "'text.format' of type json_schema needs a 'schema'");
  return {{"type", "json_schema"},
          {"json_schema", {{"name", json_field(*format, "name") && (*format)["name"].is_string() ? (*format)["name"]
                                                                            : ojson("response")}, {"schema", *schema}}}};
}

// Responses tools ({type: function, name, parameters}) as chat tools.
ojson chat_tools(const ojson& tools) {
  if (!tools.is_array())
    bad_request("tools", fmt::format("'tools' must be an array, not {}", json_kind(tools)));
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object())
      bad_request(p, fmt::format("'{}' must be an object, not {}", p, json_kind(t)));
    const std::string type = string_field(t, "type", p + ".type");
    if (type != "function")
      bad_request(p, fmt::format("tools of type '{}' are not supported (only 'function')", type),
                  "unsupported_tool");
    ojson fn = {{"name", t.contains("name") ? t["name"] : ojson(nullptr)}};
    if (const ojson* d = json_field(t, "description")) fn["description"] = *d;
    if (const ojson* params = json_field(t, "parameters")) fn["parameters"] = *params;
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

ojson chat_tool_choice(const ojson& choice) {
  if (choice.is_string()) return choice;
  if (choice.is_object() && choice.contains("type") && choice["type"] == "function") {
    const ojson* name = json_field(choice, "name");
    if (!name || !name->is_string())
      bad_request("tool_choice", "'tool_choice' of type function needs a 'name'");
    return {{"type", "function"}, {"function", {{"name", *name}}}};
  }
  bad_request("tool_choice",
              "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
              "\"function\", \"name\": ...}");
}

}  // namespace

ResponsesRequest parse_responses_request(const std::string& text, const ResponseLookup& lookup) {
  const ojson body = parse_request_body<ojson>(text);
  if (const ojson* bg = json_field(body, "background"); bg && *bg == true)
    throw ApiError(400, "'background' is not supported", "invalid_request_error", "background",
                   "unsupported_parameter");

  ResponsesRequest r;
  r.conversation = ojson::array();
  if (const ojson* prev = json_field(body, "previous_response_id")) {
    if (!prev->is_string())
      bad_request("previous_response_id",
                  fmt::format("'previous_response_id' must be a string, not {}", json_kind(*prev)));
    r.previous_response_id = prev->get<std::string>();
    auto stored = lookup ? lookup(r.previous_response_id) : std::nullopt;
    if (!stored)
      throw ApiError(404,
                     fmt::format("Previous response with id '{}' not found.", r.previous_response_id),
                     "invalid_request_error", "previous_response_id", "previous_response_not_found");
    r.conversation = stored->messages;
  }
  const ojson* input = json_field(body, "input");
  if (!input) bad_request("input", "'input' is required");
  add_input(*input, r.conversation);

  ojson messages = ojson::array();
  ojson instructions = nullptr;
  if (const ojson* ins = json_field(body, "instructions")) {
    if (!ins->is_string())
      bad_request("instructions",
                  fmt::format("'instructions' must be a string, not {}", json_kind(*ins)));
    instructions = *ins;
    if (!ins->get<std::string>().empty())
      messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  for (const auto& m : r.conversation) messages.push_back(m);

  ojson chat = {{"messages", messages}};
  if (const ojson* m = json_field(body, "model")) chat["model"] = *m;
  // `grammar` (GBNF, the whole reply) is llama-server's chat extension, taken here too.
  for (const char* key : {"temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
                          "frequency_penalty", "repetition_penalty", "stream", "parallel_tool_calls",
                          "grammar"})
    if (const ojson* v = json_field(body, key)) chat[key] = *v;
  if (const ojson* mot = json_field(body, "max_output_tokens")) {
    if (!mot->is_number_integer())
      bad_request("max_output_tokens",
                  fmt::format("'max_output_tokens' must be an integer, not {}", json_kind(*mot)));
    const bool negative = !mot->is_number_unsigned() && mot->get<int64_t>() < 1;
    if (negative || mot->get<uint64_t>() < 1 ||
        mot->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      bad_request("max_output_tokens",
                  fmt::format("'max_output_tokens' must be in [1, {}] (got {})",
                              std::numeric_limits<int32_t>::max(), mot->dump()));
    r.max_output_tokens = mot->get<int64_t>();
  }
  ojson text_echo = {{"format", {{"type", "text"}}}};
  if (const ojson* t = json_field(body, "text")) {
    ojson rf = response_format(*t);
    if (!rf.is_null()) chat["response_format"] = rf;
    if (json_field(*t, "format")) text_echo = {{"format", (*t)["format"]}};
  }
  if (const ojson* t = json_field(body, "tools")) chat["tools"] = chat_tools(*t);
  if (const ojson* c = json_field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*c);
  if (const ojson* s = json_field(body, "store")) {
    if (!s->is_boolean())
      bad_request("store", fmt::format("'store' must be a boolean, not {}", json_kind(*s)));
    r.store = s->get<bool>();
  }
  const ojson* metadata = json_field(body, "metadata");
  if (metadata && !metadata->is_object())
    bad_request("metadata",
                fmt::format("'metadata' must be an object, not {}", json_kind(*metadata)));

  r.chat = parse_translated_chat(chat, {{"max_completion_tokens", "max_output_tokens"},
                                        {"response_format", "text.format"},
                                        {".function.", "."},
                                        {"messages", "input"}});

  r.echo = {{"instructions", instructions},
            {"max_output_tokens", r.max_output_tokens ? ojson(*r.max_output_tokens) : ojson()},
            {"parallel_tool_calls", r.chat.parallel_tool_calls},
            {"previous_response_id",
             r.previous_response_id.empty() ? ojson() : ojson(r.previous_response_id)},
            {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
            {"store", r.store},
            {"temperature", r.chat.sampling.temperature},
            {"text", text_echo},
            {"tool_choice", json_field(body, "tool_choice") ? body["tool_choice"] : ojson("auto")},
            {"tools", json_field(body, "tools") ? body["tools"] : ojson::array()},
            {"top_p", r.chat.sampling.top_p},
            {"truncation", "disabled"},
            {"user", json_field(body, "user") ? body["user"] : ojson()},
            {"metadata", metadata ? *metadata : ojson::object()}};
  return r;
}

ojson responses_usage_json(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

ResponsesOutput::ResponsesOutput(const ResponsesRequest& request, std::string model,
                                 int64_t created_at, ResponseSaver saver)
    : id_(new_random_id("resp_")),
      message_id_(new_random_id("msg_")),
      reasoning_id_(new_random_id("rs_")),
      model_(std::move(model)),
      created_at_(created_at),
      echo_(request.echo),
      conversation_(request.conversation),
      previous_response_id_(request.previous_response_id),
      store_(request.store),
      saver_(std::move(saver)) {}

ojson ResponsesOutput::response(const std::string& status, const ojson& output,
                                const Usage* usage) const {
  ojson r = {{"id", id_},
             {"object", "response"},
             {"created_at", created_at_},
             {"status", status},
             {"error", nullptr},
             {"incomplete_details", nullptr},
             {"model", model_},
             {"output", output},
             {"usage", usage ? responses_usage_json(*usage) : ojson()}};
  if (status == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  for (const auto& [k, v] : echo_.items()) r[k] = v;
  return r;
}

namespace {

// An event's fields about content part 0 of the output item `item_id` at
// `index`, then `more` (its delta, text or part).
ojson part_fields(const std::string& item_id, size_t index, const ojson& more) {
  ojson f = {{"item_id", item_id}, {"output_index", index}, {"content_index", 0}};
  for (const auto& [k, v] : more.items()) f[k] = v;
  return f;
}

ojson reasoning_part(const std::string& text) {
  return {{"type", "reasoning_text"}, {"text", text}};
}

ojson output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}};
}

}  // namespace

std::string ResponsesOutput::event(const char* type, ojson payload) {
  ojson j = {{"type", type}};
  for (const auto& [k, v] : payload.items()) j[k] = v;
  j["sequence_number"] = sequence_++;
  return sse_event(type, j);
}

ojson ResponsesOutput::message_item(const std::string& text, const char* status) const {
  ojson content = ojson::array();
  if (std::string(status) != "in_progress") {
    ojson part = output_text_part(text);
    part["logprobs"] = ojson::array();
    content.push_back(std::move(part));
  }
  return {{"id", message_id_},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", content}};
}

ojson ResponsesOutput::function_call_item(const ToolCallResult& call, const char* status) const {
  // The call id is "call_HEX"; the item id reuses its digits.
  const std::string digits = call.id.rfind("call_", 0) == 0 ? call.id.substr(5) : call.id;
  return {{"id", "fc_" + digits},
          {"type", "function_call"},
          {"status", status},
          {"arguments", std::string(status) == "in_progress" ? "" : call.arguments},
          {"call_id", call.id},
          {"name", call.name}};
}

std::string ResponsesOutput::stream_begin(size_t, const Usage&) {
  std::string sse = event("response.created", {{"response", response("in_progress", ojson::array(), nullptr)}});
  sse += event("response.in_progress", {{"response", response("in_progress", ojson::array(), nullptr)}});
  return sse;
}

ojson ResponsesOutput::reasoning_item(const std::string& text, const char* status) const {
  ojson content = ojson::array();
  if (std::string(status) != "in_progress") content.push_back(reasoning_part(text));
  return {{"id", reasoning_id_},
          {"type", "reasoning"},
          {"status", status},
          {"summary", ojson::array()},
          {"content", content}};
}

std::string ResponsesOutput::stream_reasoning(int32_t, const std::string& text) {
  if (text.empty()) return "";
  std::string sse;
  const size_t index = output_.size();
  if (!reasoning_open_) {
    reasoning_open_ = true;
    sse += event("response.output_item.added",
                 {{"output_index", index}, {"item", reasoning_item("", "in_progress")}});
    sse += event("response.content_part.added",
                 part_fields(reasoning_id_, index, {{"part", reasoning_part("")}}));
  }
  reasoning_ += text;
  sse +=
      event("response.reasoning_text.delta", part_fields(reasoning_id_, index, {{"delta", text}}));
  return sse;
}

std::string ResponsesOutput::close_reasoning() {
  if (!reasoning_open_) return "";
  reasoning_open_ = false;
  const size_t index = output_.size();
  std::string sse = event("response.reasoning_text.done",
                          part_fields(reasoning_id_, index, {{"text", reasoning_}}));
  sse += event("response.content_part.done",
               part_fields(reasoning_id_, index, {{"part", reasoning_part(reasoning_)}}));
  ojson item = reasoning_item(reasoning_, "completed");
  sse += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  return sse;
}

std::string ResponsesOutput::open_message() {
  if (message_open_) return "";
  std::string sse = close_reasoning();
  message_open_ = true;
  const size_t index = output_.size();
  sse += event("response.output_item.added",
                          {{"output_index", index}, {"item", message_item("", "in_progress")}});
  sse += event("response.content_part.added",
               part_fields(message_id_, index, {{"part", output_text_part("")}}));
  return sse;
}

std::string ResponsesOutput::stream_text(int32_t, const std::string& text,
                                         const std::vector<LogprobItem>&) {
  if (text.empty()) return "";
  std::string sse = open_message();
  sse += event(
      "response.output_text.delta",
      part_fields(message_id_, output_.size(), {{"delta", text}, {"logprobs", ojson::array()}}));
  return sse;
}

std::string ResponsesOutput::stream_tool_calls(int32_t, const std::vector<ToolCallResult>& calls) {
  std::string sse = close_reasoning();
  for (const auto& call : calls) {
    const size_t index = output_.size();
    const ojson item = function_call_item(call, "in_progress");
    sse += event("response.output_item.added", {{"output_index", index}, {"item", item}});
    sse += event("response.function_call_arguments.delta",
                 {{"item_id", item["id"]}, {"output_index", index}, {"delta", call.arguments}});
    sse += event("response.function_call_arguments.done",
                 {{"item_id", item["id"]}, {"output_index", index}, {"arguments", call.arguments}});
    ojson done = function_call_item(call, "completed");
    sse += event("response.output_item.done", {{"output_index", index}, {"item", done}});
    output_.push_back(std::move(done));
  }
  return sse;
}

std::string ResponsesOutput::stream_finish(int32_t, const ChoiceResult& choice) {
  result_ = choice;
  if (!choice.tool_calls.empty()) return close_reasoning();
  // A reply is a message even when it is empty.
  std::string sse = open_message();
  const size_t index = output_.size();
  const char* status = choice.finish_reason == FinishReason::kLength ? "incomplete" : "completed";
  sse +=
      event("response.output_text.done",
            part_fields(message_id_, index, {{"text", choice.text}, {"logprobs", ojson::array()}}));
  sse += event("response.content_part.done",
               part_fields(message_id_, index, {{"part", output_text_part(choice.text)}}));
  ojson item = message_item(choice.text, status);
  sse += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  return sse;
}

std::string ResponsesOutput::stream_end(const Usage& usage) {
  const bool incomplete = result_.finish_reason == FinishReason::kLength;
  ojson r = response(incomplete ? "incomplete" : "completed", output_, &usage);
  save(r, result_);
  return event(incomplete ? "response.incomplete" : "response.completed", {{"response", r}});
}

std::string ResponsesOutput::stream_error(const ApiError& e) {
  ojson r = response("failed", output_, nullptr);
  r["error"] = {{"code", e.code.empty() ? e.type : e.code}, {"message", e.what()}};
  return event("response.failed", {{"response", r}});
}

ojson ResponsesOutput::full(const std::vector<ChoiceResult>& choices, const Usage& usage) {
  const ChoiceResult& c = choices.at(0);
  const bool incomplete = c.finish_reason == FinishReason::kLength;
  ojson output = ojson::array();
  if (!c.reasoning.empty()) output.push_back(reasoning_item(c.reasoning, "completed"));
  if (c.tool_calls.empty()) output.push_back(message_item(c.text, incomplete ? "incomplete" : "completed"));
  for (const auto& call : c.tool_calls) output.push_back(function_call_item(call, "completed"));
  ojson r = response(incomplete ? "incomplete" : "completed", output, &usage);
  save(r, c);
  return r;
}

void ResponsesOutput::save(const ojson& response, const ChoiceResult& choice) {
  if (!store_ || !saver_) return;
  ojson reply = {{"role", "assistant"}, {"content", choice.text}};
  if (!choice.reasoning.empty()) reply["reasoning_content"] = choice.reasoning;
  if (!choice.tool_calls.empty()) reply["tool_calls"] = tool_calls_json(choice.tool_calls);
  StoredResponse stored{response, conversation_};
  stored.messages.push_back(std::move(reply));
  saver_(id_, std::move(stored));
}

}  // namespace pagellm
