// A model reply (byte 0 picks the format) through the tool-call parser:
// whatever it finds must be calls to the given tools with JSON-object
// arguments; nothing may throw.
#include <nlohmann/json.hpp>
#include <string>

#include "entries/fuzz_entries.h"
#include "server/tool_calls.h"

namespace pagellm::fuzz {

int tool_calls(const uint8_t* data, size_t size) {
  if (size == 0 || size > 65536) return 0;
  static const ToolFormat kFormats[] = {ToolFormat::kHermes, ToolFormat::kLlama3,
                                        ToolFormat::kMistral};
  const ToolFormat format = kFormats[data[0] % 3];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  static const std::vector<ToolSpec> tools = {
      {"get_time", "", nlohmann::ordered_json::object()},
      {"get_weather", "", nlohmann::ordered_json::object()}};
  std::string content;
  for (const auto& c : parse_tool_calls(format, text, tools, content)) {
    if (c.name != "get_time" && c.name != "get_weather") violated("a call to an unknown tool");
    nlohmann::json args;
    try {
      args = nlohmann::json::parse(c.arguments);
    } catch (const nlohmann::json::exception&) {
      violated("call arguments that are not JSON");
    }
    if (!args.is_object()) violated("call arguments that are not an object");
  }
  if (content.size() > text.size()) violated("content longer than the reply");
  return 0;
}

}  // namespace pagellm::fuzz
