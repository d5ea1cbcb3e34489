// Turns chat messages into the prompt the model expects, with the model's
// chat template (tokenizer/chat_template.h): a --chat-template override, else
// the model's own `tokenizer.chat_template`, else a built-in matching its
// family, else ChatML.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/reasoning.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_template.h"

namespace pagellm {

class GgufFile;
class Vocab;

struct RenderedPrompt {
  std::string text;
  // Whether the tokenizer should add BOS: not when the template already wrote it.
  bool add_bos = true;
};

class ChatPrompt {
 public:
  // The template for the model in `file`. `override_spec`: empty, a built-in
  // name or a Jinja file (bad ones throw ConfigError / jinja::TemplateError).
  static std::unique_ptr<ChatPrompt> for_model(const GgufFile& file, const Vocab& vocab,
                                               std::string_view override_spec = {});

  // The conversation, ending with the opening of the assistant's reply.
  // Throws ApiError (400) when the template refuses the conversation.
  RenderedPrompt render(const std::vector<ChatMessage>& messages) const;
  // The same with tools and tool messages (server/tool_calls.h): `messages`
  // as the template takes them (tool_calls, tool_call_id); `tools_json` the
  // request's tools. A template that does not render tools gets them in a
  // system message, calls as <tool_call> text and results as user turns.
  // `kwargs`: extra template variables (an object, or null) over the
  // server's defaults; assistant messages may carry `reasoning_content`.
  RenderedPrompt render_with_tools(const nlohmann::ordered_json& messages,
                                   const nlohmann::ordered_json& tools_json,
                                   const std::vector<ToolSpec>& tools,
                                   const nlohmann::ordered_json& kwargs = nullptr) const;

  // Server-wide settings (serve --reasoning-format, --chat-template-kwargs).
  void set_reasoning_format(ReasoningFormat f) { reasoning_format_ = f; }
  ReasoningFormat reasoning_format() const { return reasoning_format_; }
  void set_template_kwargs(nlohmann::ordered_json kwargs) { template_kwargs_ = std::move(kwargs); }
  const nlohmann::ordered_json& template_kwargs() const { return template_kwargs_; }
  // The think tags of a reasoning template (nullopt: the template does not reason).
  const std::optional<ThinkSyntax>& think_syntax() const { return think_; }
  const std::string& source() const { return tmpl_.source(); }

  // Which template, for the ready line: "from the model", "chatml
  // (chosen on the command line)", "llama3 (built-in, matching the model)", "chatml
  // (built-in default)".
  std::string description() const;
  // Set when choosing the template had something to report (its own did not parse, ...).
  const std::string& warning() const { return warning_; }

 private:
  ChatPrompt(ResolvedChatTemplate resolved, ChatRenderOptions options);
  // render() as a RenderedPrompt: template failures become 400s, BOS decided.
  template <class RenderFn>
  RenderedPrompt checked(const RenderFn& render) const;

  ChatTemplate tmpl_;
  std::string origin_;
  std::string warning_;
  ChatRenderOptions options_;
  ReasoningFormat reasoning_format_ = ReasoningFormat::kAuto;
  nlohmann::ordered_json template_kwargs_;
  std::optional<ThinkSyntax> think_;
};

}  // namespace pagellm
