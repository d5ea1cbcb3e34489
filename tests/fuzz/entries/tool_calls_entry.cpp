// A model reply (byte 0 picks the format) through the tool-call parser:
// whatever it finds must be calls to the given tools with JSON-object
// arguments; nothing may throw. The same reply through the reply splitters
// (<think> tags, opened in the prompt or not; harmony channels): streamed in
// two pieces cut where byte 0 says, they must give what the whole reply
// gives, and no more text than the reply holds.
#include <nlohmann/json.hpp>
#include <memory>
#include <string>

#include "entries/fuzz_entries.h"
#include "server/harmony.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace pagellm::fuzz {

namespace {

template <class Make>
void split_both_ways(const std::string& text, size_t cut, const Make& make) {
  auto read = [&](size_t at) {
    auto s = make();
    ReplySplitter::Delta all = s->push(std::string_view(text).substr(0, at));
    const auto rest = s->push(std::string_view(text).substr(at));
    const auto last = s->finish();
    all.reasoning += rest.reasoning + last.reasoning;
    all.content += rest.content + last.content;
    return std::make_pair(all, s->tool_calls().size());
  };
  const auto whole = read(text.size());
  const auto two = read(cut);
  if (whole.first.reasoning != two.first.reasoning || whole.first.content != two.first.content ||
      whole.second != two.second)
    violated("a reply split in two pieces reads differently from the whole reply");
  if (whole.first.reasoning.size() + whole.first.content.size() > text.size())
    violated("the splitter gave more text than the reply holds");
}

}  // namespace

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
  const size_t cut = text.empty() ? 0 : data[0] % (text.size() + 1);
  for (bool opened : {false, true})
    split_both_ways(text, cut, [opened] { return std::make_unique<ReasoningSplitter>(ThinkSyntax{}, opened); });
  split_both_ways(text, cut, [] { return std::make_unique<HarmonySplitter>(); });
  return 0;
}

}  // namespace pagellm::fuzz
