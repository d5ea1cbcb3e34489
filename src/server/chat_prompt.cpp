#include "server/chat_prompt.h"

#include "server/api_error.h"
#include "jinja/jinja_error.h"
#include "tokenizer/vocab.h"

namespace pagellm {

ChatPrompt::ChatPrompt(ResolvedChatTemplate resolved, ChatRenderOptions options)
    : tmpl_(std::move(resolved.tmpl)),
      origin_(std::move(resolved.origin)),
      warning_(std::move(resolved.warning)),
      options_(std::move(options)),
      think_(think_syntax_of(tmpl_.source())) {
  options_.add_generation_prompt = true;
}

std::unique_ptr<ChatPrompt> ChatPrompt::for_model(const GgufFile& file, const Vocab& vocab,
                                                  std::string_view override_spec) {
  auto resolved = resolve_chat_template(chat_template_from_gguf(file), override_spec, &vocab);
  return std::unique_ptr<ChatPrompt>(
      new ChatPrompt(std::move(resolved), ChatRenderOptions::for_vocab(vocab)));
}

RenderedPrompt ChatPrompt::render(const std::vector<ChatMessage>& messages) const {
  return checked([&] { return tmpl_.render(messages, options_); });
}

template <class RenderFn>
RenderedPrompt ChatPrompt::checked(const RenderFn& render) const {
  RenderedPrompt out;
  try {
    out.text = render();
  } catch (const jinja::TemplateRaised& e) {
    throw ApiError(400, "the chat template refused the messages: " + e.message(),
                   "invalid_request_error", "messages");
  } catch (const jinja::TemplateError& e) {
    throw ApiError(400, std::string("the chat template failed on the messages: ") + e.what(),
                   "invalid_request_error", "messages");
  } catch (const ConfigError& e) {  // render_json: malformed message JSON
    throw ApiError(400, std::string("the chat messages: ") + e.what(), "invalid_request_error",
                   "messages");
  }
  // Templates that write {{ bos_token }} already start with it.
  const std::string& bos = options_.bos_token;
  out.add_bos = bos.empty() || out.text.compare(0, bos.size(), bos) != 0;
  return out;
}

RenderedPrompt ChatPrompt::render_with_tools(const nlohmann::ordered_json& messages,
                                             const nlohmann::ordered_json& tools_json,
                                             const std::vector<ToolSpec>& tools,
                                             const nlohmann::ordered_json& kwargs) const {
  using ojson = nlohmann::ordered_json;
  ojson msgs = messages;
  // Templates that read past thoughts as `thinking` (gpt-oss) get them there.
  if (source().find("reasoning_content") == std::string::npos &&
      source().find(".thinking") != std::string::npos)
    for (auto& m : msgs)
      if (m.contains("reasoning_content")) m["thinking"] = m["reasoning_content"];
  ojson extra = ojson::object();
  for (const ojson* vars : {&template_kwargs_, &kwargs})
    if (vars->is_object())
      for (const auto& [k, v] : vars->items()) extra[k] = v;
  if (template_renders_tools(source())) {
    if (!tools_json.is_null() && !tools_json.empty()) extra["tools"] = tools_json;
  } else {
    // The generic form: tools described in a system message, calls and
    // results as text the template can hold.
    ojson plain = ojson::array();
    for (const auto& m : msgs) {
      ojson p = {{"role", m["role"]}, {"content", m["content"]}};
      if (m.contains("reasoning_content")) p["reasoning_content"] = m["reasoning_content"];
      if (m.contains("tool_calls"))
        for (const auto& tc : m["tool_calls"])
          p["content"] = p["content"].get<std::string>() + "<tool_call>\n" +
                         ojson{{"name", tc["function"]["name"]},
                               {"arguments", tc["function"]["arguments"]}}.dump() +
                         "\n</tool_call>";
      if (m["role"] == "tool") {
        p["role"] = "user";
        p["content"] = "<tool_response>\n" + m["content"].get<std::string>() + "\n</tool_response>";
      }
      plain.push_back(std::move(p));
    }
    if (!tools.empty()) {
      const std::string sys = generic_tools_prompt(tools);
      if (!plain.empty() && plain[0]["role"] == "system")
        plain[0]["content"] = plain[0]["content"].get<std::string>() + "\n\n" + sys;
      else
        plain.insert(plain.begin(), ojson{{"role", "system"}, {"content", sys}});
    }
    msgs = std::move(plain);
  }
  return checked([&] { return tmpl_.render_json(msgs, options_, extra.empty() ? nullptr : &extra); });
}

std::string ChatPrompt::description() const {
  if (origin_ == "model") return "from the model";
  if (origin_ == "override") return tmpl_.name() + " (chosen on the command line)";
  if (origin_ == "detected") return tmpl_.name() + " (built-in, matching the model)";
  return tmpl_.name() + " (built-in default)";
}

}  // namespace pagellm
