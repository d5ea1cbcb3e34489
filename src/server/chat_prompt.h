// Turns chat messages into the prompt the model expects, with the model's
// chat template (tokenizer/chat_template.h): a --chat-template override, else
// the model's own `tokenizer.chat_template`, else a built-in matching its
// family, else ChatML.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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
  RenderedPrompt render_with_tools(const nlohmann::ordered_json& messages,
                                   const nlohmann::ordered_json& tools_json,
                                   const std::vector<ToolSpec>& tools) const;
  const std::string& source() const { return tmpl_.source(); }

  // "NAME (ORIGIN)", e.g. "model (model)", "chatml (default)".
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
};

}  // namespace pagellm
