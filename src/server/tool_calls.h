// OpenAI tool calling over chat templates: which text format a model writes
// calls in, the grammar that forces calls (tool_choice required or a named
// function), and the parser that finds calls in a reply (tool_choice auto).
//
// Formats (from the chat template's source):
//   kMistral  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]
//   kLlama3   {"name": N, "parameters": {...}}  (one call; Llama 3.1 JSON)
//   kHermes   <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>
//             (Qwen 2.5, Hermes; also the generic format: templates that do
//             not render tools get a system message that describes the tools
//             and asks for this form)
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm {

enum class ToolFormat { kHermes, kLlama3, kMistral };

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // a JSON Schema (an object)
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object
};

// The format a template writes calls in.
ToolFormat tool_format_of(std::string_view template_source);
// Whether the template renders a `tools` variable itself.
bool template_renders_tools(std::string_view template_source);

// GBNF whose texts are one call (several with `parallel`) of one of `tools`,
// arguments valid under its parameters schema. Throws JsonSchemaError.
std::string tool_call_gbnf(ToolFormat format, const std::vector<ToolSpec>& tools, bool parallel);

// The calls in `text` (only calls to one of `tools`, arguments a JSON
// object), and in `content` the text outside them (trimmed). No calls:
// content is the text.
std::vector<ParsedToolCall> parse_tool_calls(ToolFormat format, const std::string& text,
                                             const std::vector<ToolSpec>& tools,
                                             std::string& content);

// Of calls a format carries apart (harmony's functions.NAME messages), those
// to one of `tools` whose arguments are a JSON object (compacted).
std::vector<ParsedToolCall> known_calls(const std::vector<ParsedToolCall>& calls,
                                        const std::vector<ToolSpec>& tools);

// The system text for templates that do not render tools (kHermes form).
std::string generic_tools_prompt(const std::vector<ToolSpec>& tools);

}  // namespace pagellm
