#include "server/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>

#include "grammar/json_schema.h"

namespace pagellm {

namespace {

using ojson = nlohmann::ordered_json;

// A GBNF literal of `s` (bytes as they are, quotes and backslashes escaped).
std::string lit(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

const ToolSpec* find_tool(const std::vector<ToolSpec>& tools, const std::string& name) {
  for (const auto& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

// One call object {"name": ..., ARGS_KEY: {...}} as JSON, if it is one.
bool call_of(const ojson& j, const char* args_key, const std::vector<ToolSpec>& tools,
             ParsedToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const std::string name = j["name"].get<std::string>();
  if (!find_tool(tools, name)) return false;
  const ojson* args = nullptr;
  for (const char* key : {args_key, "arguments", "parameters"})
    if (j.contains(key)) {
      args = &j[key];
      break;
    }
  ojson a = args ? *args : ojson::object();
  if (a.is_string()) {  // arguments given as JSON text
    try {
      a = ojson::parse(a.get<std::string>());
    } catch (const ojson::exception&) {
      return false;
    }
  }
  if (!a.is_object()) return false;
  out = {name, a.dump()};
  return true;
}

// Parses a JSON value at the start of `s` (leading spaces skipped); `used`
// is how many bytes it took. False when there is none.
bool json_prefix(std::string_view s, ojson& out, size_t& used) {
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\n' || s[b] == '\t' || s[b] == '\r')) ++b;
  if (b == s.size() || (s[b] != '{' && s[b] != '[')) return false;
  // The shortest prefix that is whole JSON: scan brackets outside strings.
  int depth = 0;
  bool in_str = false, esc = false;
  for (size_t i = b; i < s.size(); ++i) {
    const char c = s[i];
    if (in_str) {
      if (esc)
        esc = false;
      else if (c == '\\')
        esc = true;
      else if (c == '"')
        in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) {
        try {
          out = ojson::parse(s.substr(b, i + 1 - b));
        } catch (const ojson::exception&) {
          return false;
        }
        used = i + 1;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

ToolFormat tool_format_of(std::string_view src) {
  if (src.find("[TOOL_CALLS]") != std::string_view::npos) return ToolFormat::kMistral;
  if (src.find("<tool_call>") != std::string_view::npos) return ToolFormat::kHermes;
  if (src.find("\"parameters\"") != std::string_view::npos &&
      src.find("<|python_tag|>") != std::string_view::npos)
    return ToolFormat::kLlama3;
  return ToolFormat::kHermes;
}

bool template_renders_tools(std::string_view src) {
  return src.find("tools") != std::string_view::npos;
}

std::string tool_call_gbnf(ToolFormat format, const std::vector<ToolSpec>& tools, bool parallel) {
  std::string rules, calls;
  const char* args_key = format == ToolFormat::kLlama3 ? "parameters" : "arguments";
  for (size_t i = 0; i < tools.size(); ++i) {
    const SchemaGrammar args =
        json_schema_fragment(tools[i].parameters, fmt::format("t{}-", i));
    rules += args.rules;
    const std::string head = fmt::format("{{\"name\": \"{}\", \"{}\": ", tools[i].name, args_key);
    calls += fmt::format("{}{} {} \"}}\"", calls.empty() ? "" : " | ", lit(head), args.expr);
  }
  std::string out = fmt::format("call ::= {}\n", calls);
  switch (format) {
    case ToolFormat::kHermes:
      out += "one ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n";
      out += parallel ? "root ::= one (\"\\n\" one)*\n" : "root ::= one\n";
      break;
    case ToolFormat::kLlama3:
      out += "root ::= call\n";  // one call per turn
      break;
    case ToolFormat::kMistral:
      out += parallel ? "root ::= \"[TOOL_CALLS]\"? \"[\" call (\", \" call)* \"]\"\n"
                      : "root ::= \"[TOOL_CALLS]\"? \"[\" call \"]\"\n";
      break;
  }
  return out + rules + json_base_gbnf();
}

std::vector<ParsedToolCall> parse_tool_calls(ToolFormat format, const std::string& text,
                                             const std::vector<ToolSpec>& tools,
                                             std::string& content) {
  std::vector<ParsedToolCall> calls;
  const char* args_key = format == ToolFormat::kLlama3 ? "parameters" : "arguments";
  if (format == ToolFormat::kHermes) {
    std::string rest;
    size_t pos = 0;
    while (true) {
      const size_t open = text.find("<tool_call>", pos);
      if (open == std::string::npos) break;
      const size_t close = text.find("</tool_call>", open);
      ojson j;
      size_t used = 0;
      const std::string_view body = std::string_view(text).substr(
          open + 11, (close == std::string::npos ? text.size() : close) - open - 11);
      ParsedToolCall c;
      if (!json_prefix(body, j, used) || !call_of(j, args_key, tools, c)) break;
      rest += text.substr(pos, open - pos);
      calls.push_back(c);
      pos = close == std::string::npos ? text.size() : close + 12;
    }
    content = trim(rest + text.substr(std::min(pos, text.size())));
    return calls;
  }
  // Mistral and Llama 3: the calls are the reply (after an optional marker).
  std::string body = trim(text);
  for (const char* marker : {"[TOOL_CALLS]", "<|python_tag|>"})
    if (body.rfind(marker, 0) == 0) body = trim(body.substr(std::string(marker).size()));
  ojson j;
  size_t used = 0;
  if (json_prefix(body, j, used) && trim(body.substr(used)).empty()) {
    const ojson list = j.is_array() ? j : ojson::array({j});
    for (const auto& item : list) {
      ParsedToolCall c;
      if (!call_of(item, args_key, tools, c)) {
        calls.clear();
        break;
      }
      calls.push_back(c);
    }
  }
  content = calls.empty() ? text : "";
  return calls;
}

std::vector<ParsedToolCall> known_calls(const std::vector<ParsedToolCall>& calls,
                                        const std::vector<ToolSpec>& tools) {
  std::vector<ParsedToolCall> out;
  for (const auto& c : calls) {
    ParsedToolCall parsed;
    if (call_of(ojson{{"name", c.name}, {"arguments", c.arguments}}, "arguments", tools, parsed))
      out.push_back(std::move(parsed));
  }
  return out;
}

std::string generic_tools_prompt(const std::vector<ToolSpec>& tools) {
  std::string out =
      "You can call functions. To call one, reply with\n<tool_call>\n{\"name\": NAME, "
      "\"arguments\": ARGUMENTS}\n</tool_call>\nwhere ARGUMENTS is a JSON object that follows the "
      "function's parameters. The functions:\n";
  for (const auto& t : tools) {
    ojson j = {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}};
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace pagellm
