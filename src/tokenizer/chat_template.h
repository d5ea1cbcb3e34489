// Chat templates: a conversation -> the prompt text a model was trained on.
//
// A ChatTemplate is a Jinja template (jinja_template.h) rendered as Hugging
// Face's apply_chat_template renders it, with the variables
//   messages               list of {role, content, ...} dicts
//   add_generation_prompt  bool: end with the opening of an assistant turn
//   bos_token, eos_token   the vocabulary's BOS/EOS texts
// plus any extra variables (tools, documents, date_string, ...), and the
// globals raise_exception() and strftime_now().
//
// resolve_chat_template() picks the template for a model: an explicit
// override (a built-in name or a file), else the model's own
// `tokenizer.chat_template` if it parses, else a built-in matching the family
// its markers (or the vocabulary's special tokens) point to, else chatml.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "jinja/jinja_eval.h"
#include "jinja/jinja_template.h"

namespace pagellm {

class GgufFile;
class Vocab;

struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  jinja::RenderOptions render;  // limits and the strftime_now clock

  // bos_token / eos_token from the vocabulary's BOS / EOS texts ("" when none).
  static ChatRenderOptions for_vocab(const Vocab& vocab);
};

class ChatTemplate {
 public:
  // Parses a template. `name` names it in errors ("model", "chatml", a path).
  // Throws jinja::TemplateError.
  ChatTemplate(std::string_view source, std::string name);

  // A built-in by name (see chat_template_builtins.h). Throws ConfigError for
  // an unknown name, listing the known ones.
  static ChatTemplate builtin(std::string_view name);
  static const std::vector<std::string_view>& builtin_names();

  const std::string& name() const { return tmpl_.name(); }
  const std::string& source() const { return source_; }

  // Renders plain text messages. Throws jinja::TemplateError
  // (jinja::TemplateRaised when the template refuses the conversation).
  std::string render(std::span<const ChatMessage> messages, const ChatRenderOptions& opts) const;
  // Renders OpenAI-style messages as given (a JSON array of objects whose
  // content may be a string, null or a list of parts, with tool_calls and the
  // like passed through). `extra`, a JSON object, adds variables (tools, ...)
  // and may override the standard ones. Malformed input (not an array, nested
  // too deeply) throws ConfigError.
  std::string render_json(const nlohmann::ordered_json& messages, const ChatRenderOptions& opts,
                          const nlohmann::ordered_json* extra = nullptr) const;
  // Renders with `vars` on top of the standard variables.
  std::string render_vars(const jinja::Value& messages, const ChatRenderOptions& opts,
                          const jinja::Dict& extra) const;

 private:
  std::string source_;
  jinja::Template tmpl_;
};

// The built-in whose format a template's text (or a vocabulary's special
// tokens) points to: "<|im_start|>" chatml, "<|start_header_id|>" llama3,
// "<start_of_turn>" gemma, "<|user|>" with "<|end|>" phi3, "<|user|>" zephyr,
// "[INST]" with "<<SYS>>" llama2, "[INST]" mistral; nullopt when none does.
std::optional<std::string_view> detect_chat_template_family(std::string_view source);
std::optional<std::string_view> detect_chat_template_family(const Vocab& vocab);

// The model's own template (GGUF key `tokenizer.chat_template`), if any.
std::optional<std::string> chat_template_from_gguf(const GgufFile& file);

struct ResolvedChatTemplate {
  ChatTemplate tmpl;
  // "override", "model", "detected" or "default"
  std::string origin;
  // Non-empty when the caller should log something (the model's template did
  // not parse, or no template was found and a default is used).
  std::string warning;
};

// Picks the template (see the top of this file). `override_spec`: empty, a
// built-in name, or a path to a Jinja file; a bad override throws ConfigError
// (unreadable file) or jinja::TemplateError (it does not parse): the user
// asked for it. `vocab` (optional) helps detect the family when the model has
// no usable template.
ResolvedChatTemplate resolve_chat_template(const std::optional<std::string>& model_template,
                                           std::string_view override_spec = {},
                                           const Vocab* vocab = nullptr);

}  // namespace pagellm
