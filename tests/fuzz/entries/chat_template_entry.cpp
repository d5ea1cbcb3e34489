// Chat templates: parse and render arbitrary sources with arbitrary messages.
#include <nlohmann/json.hpp>

#include <cstring>
#include <string_view>

#include "entries/fuzz_entries.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace pagellm::fuzz {

namespace {

const nlohmann::ordered_json& default_messages() {
  static const auto m = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi <|im_end|> {{ 1 }}"},
    {"role": "assistant", "content": "Hello.", "tool_calls": [
      {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "tool", "content": "42"},
    {"role": "user", "content": [{"type": "text", "text": "And?"}]}
  ])");
  return m;
}

}  // namespace

int chat_template(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  nlohmann::ordered_json messages = default_messages();
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (nul != std::string_view::npos) {
    auto parsed = nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, false);
    if (parsed.is_discarded()) return 0;
    if (parsed.is_object()) {  // {"messages": [...], anything else: extra variables}
      if (parsed.contains("messages")) messages = parsed["messages"];
      parsed.erase("messages");
      extra = std::move(parsed);
    } else {
      messages = std::move(parsed);
    }
  }
  ChatRenderOptions opts;
  opts.bos_token = "<s>";
  opts.eos_token = "</s>";
  opts.add_generation_prompt = size % 2 == 0;
  opts.render.limits.max_bytes = size_t{1} << 20;
  opts.render.limits.max_steps = 200'000;
  opts.render.now = [] {
    std::tm t{};
    t.tm_year = 124;
    t.tm_mday = 1;
    return t;
  };
  try {
    ChatTemplate tmpl(source, "fuzz");
    const std::string out = tmpl.render_json(messages, opts, &extra);
    if (out.size() > opts.render.limits.max_bytes) violated("output over the byte limit");
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace pagellm::fuzz
