#include "server/json_fields.h"
#include "server/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pagellm {

namespace {

using json = nlohmann::json;

constexpr int32_t kMaxN = 128;        // choices per prompt
constexpr int32_t kMaxChoices = 128;  // prompts x n
constexpr size_t kMaxStops = 16;
constexpr int32_t kMaxTopLogprobs = 20;

// obj[key] when it is a string, else "" (json::value() would throw on another type).
std::string string_or_empty(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<bool> get_bool(const json& obj, const char* key) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    bad_request(key, fmt::format("'{}' must be a boolean, not {}", key, json_kind(*v)));
  return v->get<bool>();
}

std::optional<double> get_number(const json& obj, const char* key) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number())
    bad_request(key, fmt::format("'{}' must be a number, not {}", key, json_kind(*v)));
  const double d = v->get<double>();
  if (!std::isfinite(d)) bad_request(key, fmt::format("'{}' must be finite", key));
  return d;
}

std::optional<int64_t> get_int(const json& obj, const char* key) {
  const json* v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad_request(key, fmt::format("'{}' is too large ({})", key, u));
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer())
    bad_request(key, fmt::format("'{}' must be an integer, not {}", key, json_kind(*v)));
  return v->get<int64_t>();
}

int64_t int_in(const json& obj, const char* key, int64_t lo, int64_t hi, int64_t dflt) {
  auto v = get_int(obj, key);
  if (!v) return dflt;
  if (*v < lo || *v > hi)
    bad_request(key, fmt::format("'{}' must be in [{}, {}] (got {})", key, lo, hi, *v));
  return *v;
}

// A number in [lo, hi], or (lo, hi] when `open_lo`.
float number_in(const json& obj, const char* key, double lo, double hi, bool open_lo, float dflt) {
  auto v = get_number(obj, key);
  if (!v) return dflt;
  if ((open_lo ? !(*v > lo) : !(*v >= lo)) || !(*v <= hi))
    bad_request(key, fmt::format("'{}' must be in {}{}, {}] (got {})", key, open_lo ? "(" : "[", lo,
                                 hi, *v));
  return static_cast<float>(*v);
}

std::string message_content(const json& msg, size_t i, const std::string& role) {
  const std::string param = fmt::format("messages[{}].content", i);
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) {
    if (role == "assistant") return "";
    bad_request(param, fmt::format("messages[{}] ({}) has no content", i, role));
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    bad_request(param, fmt::format("'{}' must be a string or an array of parts, not {}", param,
                                   json_kind(*it)));
  std::string text;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& part = (*it)[k];
    const std::string pp = fmt::format("{}[{}]", param, k);
    if (!part.is_object()) bad_request(pp, fmt::format("'{}' must be an object", pp));
    const json* type = json_field(part, "type");
    if (!type || !type->is_string()) bad_request(pp, fmt::format("'{}' needs a string 'type'", pp));
    if (*type != "text")
      bad_request(pp, fmt::format("content parts of type '{}' are not supported (only 'text')",
                                  type->get<std::string>()));
    const json* t = json_field(part, "text");
    if (!t || !t->is_string()) bad_request(pp, fmt::format("'{}' needs a string 'text'", pp));
    text += t->get<std::string>();
  }
  return text;
}

std::vector<ChatMessage> parse_messages(const json& body) {
  const json* v = json_field(body, "messages");
  if (!v) bad_request("messages", "'messages' is required");
  if (!v->is_array())
    bad_request("messages", fmt::format("'messages' must be an array, not {}", json_kind(*v)));
  if (v->empty()) bad_request("messages", "'messages' must not be empty");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object())
      bad_request(fmt::format("messages[{}]", i),
                  fmt::format("messages[{}] must be an object, not {}", i, json_kind(m)));
    const json* role = json_field(m, "role");
    const std::string rp = fmt::format("messages[{}].role", i);
    if (!role) bad_request(rp, fmt::format("messages[{}] has no 'role'", i));
    if (!role->is_string())
      bad_request(rp, fmt::format("'{}' must be a string, not {}", rp, json_kind(*role)));
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      bad_request(
          rp, fmt::format("unknown role '{}' in messages[{}] (expected system, developer, user, "
                          "assistant or tool)",
                          role->get<std::string>(), i));
    if (json_field(m, "tool_calls") && r != "assistant")
      bad_request(fmt::format("messages[{}].tool_calls", i),
                  "only assistant messages carry tool calls");
    if (const json* rc = json_field(m, "reasoning_content")) {
      const std::string rcp = fmt::format("messages[{}].reasoning_content", i);
      if (r != "assistant") bad_request(rcp, "only assistant messages carry reasoning_content");
      if (!rc->is_string())
        bad_request(rcp, fmt::format("'{}' must be a string, not {}", rcp, json_kind(*rc)));
    }
    out.push_back({r, message_content(m, i, r)});
  }
  return out;
}

std::vector<PromptInput> parse_prompts(const json& body) {
  return parse_prompt_inputs(body, {"prompt", "a prompt array"});
}

// logit_bias: OpenAI's object {"token id": bias}, or llama-server's array
// [[id, bias], ...] of integer ids (text keys are refused: say token ids).
// Biases are numbers in [-100, 100], each id once; prepare_completion()
// checks the ids against the vocabulary.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& body) {
  const json* v = json_field(body, "logit_bias");
  if (!v) return {};
  const char* key = "logit_bias";
  std::vector<std::pair<int32_t, float>> out;
  auto add = [&](int64_t id, const json& b, const std::string& what) {
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      bad_request(key, fmt::format("'logit_bias' token id {} is outside the vocabulary", what));
    if (!b.is_number())
      bad_request(key, fmt::format("'logit_bias' of token {} must be a number, not {}", what,
                                   json_kind(b)));
    const double d = b.get<double>();
    if (!(d >= -100.0 && d <= 100.0))
      bad_request(key,
                  fmt::format("'logit_bias' of token {} must be in [-100, 100] (got {})", what, d));
    for (const auto& [other, _] : out)
      if (other == id) bad_request(key, fmt::format("'logit_bias' names token {} twice", id));
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(d));
  };
  if (v->is_object()) {
    for (const auto& [k, b] : v->items()) {
      // A decimal id without sign or leading zeros, so no two keys name one token.
      const bool decimal = !k.empty() && k.size() <= 10 &&
                           k.find_first_not_of("0123456789") == std::string::npos &&
                           (k.size() == 1 || k[0] != '0');
      if (!decimal)
        bad_request(
            key,
            fmt::format("'logit_bias' keys must be token ids (decimal integers), not '{}'", k));
      add(std::stoll(k), b, k);
    }
  } else if (v->is_array()) {
    for (const json& pair : *v) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer())
        bad_request(key, "'logit_bias' as an array holds [token id, bias] pairs");
      add(pair[0].is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(
                                             pair[0].get<uint64_t>(), uint64_t{1} << 62))
                                       : pair[0].get<int64_t>(),
          pair[1], pair[0].dump());
    }
  } else {
    bad_request(key,
                fmt::format("'logit_bias' must be an object mapping token ids to biases, not {}",
                            json_kind(*v)));
  }
  return out;
}

std::vector<std::string> parse_stop(const json& body) {
  const json* v = json_field(body, "stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > kMaxStops)
      bad_request("stop",
                  fmt::format("'stop' holds at most {} strings (got {})", kMaxStops, v->size()));
    for (const json& s : *v) {
      if (!s.is_string())
        bad_request("stop", fmt::format("'stop' must hold only strings, found {}", json_kind(s)));
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_request("stop", fmt::format("'stop' must be a string or an array of strings, not {}",
                                    json_kind(*v)));
  }
  for (const auto& s : out)
    if (s.empty()) bad_request("stop", "stop strings must not be empty");
  return out;
}

void refuse_unsupported(const json& body, Endpoint ep) {
  auto unsupported = [](const char* key, const std::string& what) {
    throw ApiError(400, what + " is not supported", "invalid_request_error", key,
                   "unsupported_parameter");
  };
  if (auto v = get_bool(body, "echo"); v && *v) unsupported("echo", "'echo'");
  if (const json* v = json_field(body, "suffix");
      v && !(v->is_string() && v->get<std::string>().empty()))
    unsupported("suffix", "'suffix'");
  if (const json* v = json_field(body, "functions"); v && !(v->is_array() && v->empty()))
    unsupported("functions", "'functions' (the deprecated form of 'tools')");
  if (ep == Endpoint::kCompletion)
    if (const json* v = json_field(body, "tools"); v && !(v->is_array() && v->empty()))
      unsupported("tools", "'tools' on /v1/completions (use /v1/chat/completions)");
  if (ep == Endpoint::kCompletion) {
    auto best_of = get_int(body, "best_of");
    auto n = get_int(body, "n");
    if (best_of && *best_of != n.value_or(1)) unsupported("best_of", "'best_of' other than n");
  }
}

// Past reasoning and template variables reach the template only through the
// JSON messages (as tools do).
bool needs_message_json(const json& body) {
  if (json_field(body, "chat_template_kwargs")) return true;
  for (const auto& m : body["messages"])
    if (m.is_object() && json_field(m, "reasoning_content")) return true;
  return false;
}

void parse_reasoning_format(const json& body, CompletionRequest& r) {
  if (const json* f = json_field(body, "reasoning_format")) {
    const auto format = f->is_string() ? reasoning_format_from(f->get<std::string>()) : std::nullopt;
    if (!format)
      bad_request(
          "reasoning_format",
          fmt::format("'reasoning_format' must be none, auto, deepseek or deepseek-legacy (got {})",
                      f->dump()));
    r.reasoning_format = format;
  }
}

void parse_template_kwargs(const json& body, const nlohmann::ordered_json& ordered,
                           CompletionRequest& r) {
  if (const json* k = json_field(body, "chat_template_kwargs")) {
    if (!k->is_object())
      bad_request("chat_template_kwargs",
                  fmt::format("'chat_template_kwargs' must be an object, not {}", json_kind(*k)));
    for (const char* reserved : {"messages", "tools", "add_generation_prompt"})
      if (k->contains(reserved))
        bad_request(
            "chat_template_kwargs",
            fmt::format("'chat_template_kwargs' may not set '{}' (the server sets it)", reserved));
    r.template_kwargs = ordered["chat_template_kwargs"];
  }
}

// Tools, tool_choice, parallel_tool_calls, and the conversation with its
// tool calls and results as the chat template takes them.
void parse_tools(const json& body, const nlohmann::ordered_json& ordered, CompletionRequest& r) {
  if (const json* t = json_field(body, "tools")) {
    if (!t->is_array())
      bad_request("tools", fmt::format("'tools' must be an array, not {}", json_kind(*t)));
    for (size_t i = 0; i < t->size(); ++i) {
      const std::string p = fmt::format("tools[{}]", i);
      const json& tool = (*t)[i];
      if (!tool.is_object() || string_or_empty(tool, "type") != "function")
        bad_request(p, fmt::format("'{}' must be an object with \"type\": \"function\"", p));
      const json* fn = json_field(tool, "function");
      if (!fn || !fn->is_object()) bad_request(p, fmt::format("'{}' needs a 'function' object", p));
      const json* name = json_field(*fn, "name");
      if (!name || !name->is_string() || name->get<std::string>().empty() ||
          name->get<std::string>().size() > 64 ||
          name->get<std::string>().find_first_not_of(
              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos)
        bad_request(p + ".function.name", "a function name is 1-64 letters, digits, '_' or '-'");
      ToolSpec spec;
      spec.name = name->get<std::string>();
      if (const json* d = json_field(*fn, "description"); d && d->is_string()) spec.description = *d;
      const auto& params = ordered["tools"][i]["function"];
      spec.parameters = params.contains("parameters") && !params["parameters"].is_null()
                            ? params["parameters"]
                            : nlohmann::ordered_json{{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
      if (!spec.parameters.is_object())
        bad_request(p + ".function.parameters", "'parameters' must be a JSON Schema object");
      for (const auto& other : r.tools)
        if (other.name == spec.name)
          bad_request(p, fmt::format("two tools are named '{}'", spec.name));
      r.tools.push_back(std::move(spec));
    }
    if (!r.tools.empty()) r.tools_json = ordered["tools"];
  }
  if (const json* c = json_field(body, "tool_choice")) {
    if (c->is_string()) {
      const std::string v = c->get<std::string>();
      if (v == "none") r.tool_choice = CompletionRequest::ToolChoice::kNone;
      else if (v == "auto") r.tool_choice = CompletionRequest::ToolChoice::kAuto;
      else if (v == "required") r.tool_choice = CompletionRequest::ToolChoice::kRequired;
      else
        bad_request(
            "tool_choice",
            fmt::format("'tool_choice' must be none, auto, required or a function, not '{}'", v));
    } else if (c->is_object() && string_or_empty(*c, "type") == "function" && json_field(*c, "function") &&
               (*c)["function"].is_object() && (*c)["function"].contains("name") &&
               (*c)["function"]["name"].is_string()) {
      r.tool_choice = CompletionRequest::ToolChoice::kNamed;
      r.tool_name = (*c)["function"]["name"].get<std::string>();
      bool known = false;
      for (const auto& t : r.tools) known = known || t.name == r.tool_name;
      if (!known)
        bad_request("tool_choice",
                    fmt::format("'tool_choice' names '{}', which is not in 'tools'", r.tool_name));
    } else {
      bad_request("tool_choice",
                  "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                  "\"function\", \"function\": {\"name\": ...}}");
    }
    if (r.tools.empty() && r.tool_choice != CompletionRequest::ToolChoice::kNone &&
        r.tool_choice != CompletionRequest::ToolChoice::kAuto)
      bad_request("tool_choice", "'tool_choice' needs 'tools'");
  }
  r.parallel_tool_calls = get_bool(body, "parallel_tool_calls").value_or(true);
  // The conversation for the template, when tools or tool messages are in it.
  bool tool_messages = false;
  for (const auto& m : body["messages"])
    tool_messages = tool_messages || string_or_empty(m, "role") == "tool" || json_field(m, "tool_calls");
  if (r.tools.empty() && !tool_messages && !needs_message_json(body)) return;
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const auto& src = ordered["messages"][i];
    nlohmann::ordered_json m = {{"role", r.messages[i].role}, {"content", r.messages[i].content}};
    if (src.contains("tool_calls") && !src["tool_calls"].is_null()) {
      if (!src["tool_calls"].is_array())
        bad_request(fmt::format("messages[{}].tool_calls", i), "'tool_calls' must be an array");
      nlohmann::ordered_json calls = nlohmann::ordered_json::array();
      for (const auto& tc : src["tool_calls"]) {
        if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object() ||
            !tc["function"].contains("name") || !tc["function"]["name"].is_string())
          bad_request(fmt::format("messages[{}].tool_calls", i),
                      "each tool call needs a function name");
        nlohmann::ordered_json fn = {{"name", tc["function"]["name"]}};
        nlohmann::ordered_json args = tc["function"].value("arguments", nlohmann::ordered_json("{}"));
        if (args.is_string()) {
          try {
            args = nlohmann::ordered_json::parse(args.get<std::string>());
          } catch (const nlohmann::ordered_json::exception&) {
            bad_request(fmt::format("messages[{}].tool_calls", i),
                        "tool call arguments must be JSON");
          }
        }
        fn["arguments"] = args;
        calls.push_back({{"id", tc.contains("id") && tc["id"].is_string() ? tc["id"] : nlohmann::ordered_json("")}, {"type", "function"}, {"function", fn}});
      }
      m["tool_calls"] = calls;
    }
    if (src.contains("reasoning_content") && src["reasoning_content"].is_string())
      m["reasoning_content"] = src["reasoning_content"];
    if (r.messages[i].role == "tool") {
      if (src.contains("tool_call_id") && src["tool_call_id"].is_string())
        m["tool_call_id"] = src["tool_call_id"];
      if (src.contains("name") && src["name"].is_string()) m["name"] = src["name"];
    }
    msgs.push_back(std::move(m));
  }
  r.messages_json = std::move(msgs);
}

// The grammar a request's output must follow: `grammar` (GBNF),
// `response_format` {type: text | json_object | json_schema}, or `json_schema`
// (a schema, as llama-server takes it); at most one of them. Null: free text.
std::shared_ptr<const Grammar> parse_output_constraint(const json& body,
                                                      const nlohmann::ordered_json& ordered,
                                                      std::string& gbnf_out) {
  std::string gbnf;
  const char* from = nullptr;
  // Schemas come from the ordered parse: properties keep the client's order.
  auto from_schema = [&](const nlohmann::ordered_json& schema, const char* param) {
    if (!schema.is_object() && !schema.is_boolean())
      bad_request(param, fmt::format("the JSON schema must be an object, not {}",
                                     schema.is_array() ? "an array" : "a scalar"));
    try {
      gbnf = json_schema_to_gbnf(schema);
    } catch (const JsonSchemaError& e) {
      throw ApiError(400, fmt::format("invalid JSON schema: {}", e.what()), "invalid_request_error",
                     param, "invalid_json_schema");
    }
  };
  auto one = [&](const char* param) {
    if (from)
      bad_request(param,
                  fmt::format("'{}' and '{}' both constrain the output; give one", from, param));
    from = param;
  };
  if (const json* g = json_field(body, "grammar")) {
    if (!g->is_string())
      bad_request("grammar", fmt::format("'grammar' must be a string, not {}", json_kind(*g)));
    one("grammar");
    gbnf = g->get<std::string>();
  }
  if (const json* rf = json_field(body, "response_format")) {
    if (!rf->is_object())
      bad_request("response_format",
                  fmt::format("'response_format' must be an object, not {}", json_kind(*rf)));
    const json* t = json_field(*rf, "type");
    if (!t || !t->is_string())
      bad_request("response_format",
                  "'response_format' needs a 'type': text, json_object or json_schema");
    const std::string type = t->get<std::string>();
    if (type == "json_object") {
      one("response_format");
      if (json_field(*rf, "schema"))  // llama-server's form
        from_schema(ordered["response_format"]["schema"], "response_format");
      else
        gbnf = json_object_gbnf();
    } else if (type == "json_schema") {
      one("response_format");
      const json* js = json_field(*rf, "json_schema");
      if (!js || !js->is_object())
        bad_request("response_format",
                    "'response_format' of type json_schema needs a 'json_schema' object");
      if (!json_field(*js, "schema"))
        bad_request("response_format", "'json_schema' needs a 'schema'");
      from_schema(ordered["response_format"]["json_schema"]["schema"], "response_format");
    } else if (type != "text") {
      bad_request(
          "response_format",
          fmt::format("'response_format' type must be text, json_object or json_schema, not '{}'",
                      type));
    }
  }
  if (json_field(body, "json_schema")) {
    one("json_schema");
    from_schema(ordered["json_schema"], "json_schema");
  }
  if (!from || gbnf.empty()) return nullptr;
  try {
    auto grammar = compile_grammar_shared(gbnf);  // requests with one schema share it
    // A raw GBNF grammar is the whole reply, thought included; a schema is the answer's.
    if (std::string_view(from) != "grammar") gbnf_out = std::move(gbnf);
    return grammar;
  } catch (const GrammarError& e) {
    // From a schema this is the converter's bug, but the client still deserves the reason.
    throw ApiError(400, fmt::format("invalid grammar: {}", e.what()), "invalid_request_error",
                   from, "invalid_grammar");
  }
}

uint64_t random_seed() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen();
}

}  // namespace

std::vector<PromptInput> parse_prompt_inputs(const json& body, const PromptField& field) {
  const std::string key = field.key;
  const json* v = json_field(body, field.key);
  if (!v) bad_request(key, fmt::format("'{}' is required", key));
  auto text = [&](const json& t, const std::string& param) {
    if (field.refuse_empty_text && t.get_ref<const std::string&>().empty())
      bad_request(param, fmt::format("'{}' must not be empty", param));
    return PromptInput{false, t.get<std::string>(), {}};
  };
  std::vector<PromptInput> out;
  if (v->is_string()) {
    out.push_back(text(*v, key));
    return out;
  }
  if (!v->is_array())
    bad_request(key, fmt::format("'{}' must be a string, an array of strings, an array of token "
                                 "ids or an array of arrays of token ids, not {}",
                                 key, json_kind(*v)));
  if (v->empty()) bad_request(key, fmt::format("'{}' must not be empty", key));
  const json& first = v->front();
  if (first.is_number()) {
    out.push_back({true, "", json_token_ids(*v, key)});
    return out;
  }
  if (v->size() > field.max_items)
    bad_request(key, fmt::format("'{}' holds {} inputs; at most {} are allowed", key, v->size(),
                                 field.max_items));
  for (size_t i = 0; i < v->size(); ++i) {
    const json& p = (*v)[i];
    const std::string pp = fmt::format("{}[{}]", key, i);
    if (first.is_string() && p.is_string()) {
      out.push_back(text(p, pp));
    } else if (first.is_array() && p.is_array()) {
      if (p.empty()) bad_request(pp, fmt::format("'{}' must not be empty", pp));
      out.push_back({true, "", json_token_ids(p, pp)});
    } else {
      bad_request(pp, fmt::format("'{}' is {}; {} must hold only strings, only token ids or only "
                                  "arrays of token ids",
                                  pp, json_kind(p), field.array_noun));
    }
  }
  return out;
}

CompletionRequest parse_completion_request(const std::string& body_text, Endpoint endpoint) {
  const json body = parse_request_body<json>(body_text);

  CompletionRequest r;
  r.endpoint = endpoint;
  if (const json* m = json_field(body, "model")) {
    if (!m->is_string())
      bad_request("model", fmt::format("'model' must be a string, not {}", json_kind(*m)));
    r.model = m->get<std::string>();
  }
  refuse_unsupported(body, endpoint);
  if (endpoint == Endpoint::kChat)
    r.messages = parse_messages(body);
  else
    r.prompts = parse_prompts(body);

  SamplingParams& s = r.sampling;
  SamplingFields& given = r.sampling_given;
  given.temperature = json_field(body, "temperature") != nullptr;
  given.top_p = json_field(body, "top_p") != nullptr;
  given.min_p = json_field(body, "min_p") != nullptr;
  given.top_k = json_field(body, "top_k") != nullptr;
  given.repetition_penalty = json_field(body, "repetition_penalty") != nullptr;
  given.seed = json_field(body, "seed") != nullptr;
  s.temperature = number_in(body, "temperature", 0.0, 2.0, false, 1.0f);
  s.top_p = number_in(body, "top_p", 0.0, 1.0, true, 1.0f);
  s.min_p = number_in(body, "min_p", 0.0, 1.0, false, 0.0f);
  s.top_k = static_cast<int32_t>(int_in(body, "top_k", -1, std::numeric_limits<int32_t>::max(), 0));
  if (s.top_k < 0) s.top_k = 0;  // -1: off, as in vLLM
  s.presence_penalty = number_in(body, "presence_penalty", -2.0, 2.0, false, 0.0f);
  s.frequency_penalty = number_in(body, "frequency_penalty", -2.0, 2.0, false, 0.0f);
  s.logit_bias = parse_logit_bias(body);
  s.repetition_penalty = number_in(body, "repetition_penalty", 0.0, 10.0, true, 1.0f);
  s.repeat_last_n = -1;
  if (auto seed = get_int(body, "seed"))
    s.seed = static_cast<uint64_t>(*seed);
  else
    s.seed = random_seed();

  const char* max_key = "max_tokens";
  if (endpoint == Endpoint::kChat && json_field(body, "max_completion_tokens"))
    max_key = "max_completion_tokens";
  if (json_field(body, max_key))
    r.max_tokens = int_in(body, max_key, 1, std::numeric_limits<int32_t>::max(), 1);
  r.n = static_cast<int32_t>(int_in(body, "n", 1, kMaxN, 1));
  r.stop = parse_stop(body);
  r.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = json_field(body, "stream_options")) {
    if (!so->is_object())
      bad_request("stream_options",
                  fmt::format("'stream_options' must be an object, not {}", json_kind(*so)));
    if (!r.stream)
      bad_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  const bool tooling = endpoint == Endpoint::kChat &&
                      (json_field(body, "tools") || json_field(body, "tool_choice") ||
                       needs_message_json(body) || [&] {
                        for (const auto& m : body["messages"])
                          if (m.is_object() && (string_or_empty(m, "role") == "tool" || json_field(m, "tool_calls")))
                            return true;
                        return false;
                      }());
  if (json_field(body, "response_format") || json_field(body, "json_schema") || json_field(body, "grammar") ||
      tooling) {
    const auto ordered = nlohmann::ordered_json::parse(body_text);
    r.grammar = parse_output_constraint(body, ordered, r.grammar_gbnf);
    if (tooling) {
      parse_tools(body, ordered, r);
      parse_template_kwargs(body, ordered, r);
    }
    if (r.grammar && !r.tools.empty() && (r.tool_choice == CompletionRequest::ToolChoice::kRequired ||
                                          r.tool_choice == CompletionRequest::ToolChoice::kNamed))
      bad_request("tool_choice",
                  "a forced tool call cannot also follow 'response_format' or 'grammar'");
  }

  if (endpoint == Endpoint::kChat) parse_reasoning_format(body, r);
  if (endpoint == Endpoint::kChat) {
    const bool lp = get_bool(body, "logprobs").value_or(false);
    auto top = json_field(body, "top_logprobs");
    const int64_t k = int_in(body, "top_logprobs", 0, kMaxTopLogprobs, 0);
    if (top && !lp) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    r.logprobs = lp ? static_cast<int32_t>(k) : -1;
  } else {
    if (json_field(body, "logprobs"))
      r.logprobs = static_cast<int32_t>(int_in(body, "logprobs", 0, kMaxTopLogprobs, 0));
  }

  const size_t n_prompts = endpoint == Endpoint::kChat ? 1 : r.prompts.size();
  if (static_cast<int64_t>(n_prompts) * r.n > kMaxChoices)
    bad_request("n", fmt::format("{} prompts x n = {} is more than {} choices", n_prompts,
                                 static_cast<int64_t>(n_prompts) * r.n, kMaxChoices));
  return r;
}

CompletionRequest parse_translated_chat(
    const nlohmann::ordered_json& chat_body,
    const std::vector<std::pair<std::string, std::string>>& renames) {
  try {
    return parse_completion_request(
        chat_body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace),
        Endpoint::kChat);
  } catch (const ApiError& e) {
    std::string message = e.what(), param = e.param;
    auto rename = [](std::string& s, const std::string& from, const std::string& to) {
      for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
        s.replace(at, from.size(), to);
    };
    for (const auto& [from, to] : renames) {
      rename(message, from, to);
      if (param.rfind(from, 0) == 0) param = to + param.substr(from.size());
    }
    throw ApiError(e.status, message, e.type, param, e.code);
  }
}

}  // namespace pagellm
