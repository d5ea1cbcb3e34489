#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "tokenizer/chat_template_builtins.h"
#include "jinja/jinja_json.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace pagellm {

ChatRenderOptions ChatRenderOptions::for_vocab(const Vocab& vocab) {
  ChatRenderOptions opts;
  if (vocab.contains(vocab.bos())) opts.bos_token = vocab.text(vocab.bos());
  if (vocab.contains(vocab.eos())) opts.eos_token = vocab.text(vocab.eos());
  return opts;
}

ChatTemplate::ChatTemplate(std::string_view source, std::string name)
    : source_(source), tmpl_(jinja::Template::parse(source, std::move(name))) {}

ChatTemplate ChatTemplate::builtin(std::string_view name) {
  const auto source = builtin_chat_template_source(name);
  if (!source) {
    std::string known;
    for (std::string_view n : builtin_chat_template_names()) {
      known += known.empty() ? "" : ", ";
      known += n;
    }
    throw ConfigError("unknown chat template '" + std::string(name) + "' (built-ins: " + known +
                      ")");
  }
  return ChatTemplate(*source, std::string(name));
}

const std::vector<std::string_view>& ChatTemplate::builtin_names() {
  return builtin_chat_template_names();
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages,
                                 const ChatRenderOptions& opts) const {
  jinja::ValueList list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    jinja::Dict d;
    d.set(jinja::Value("role"), jinja::Value(m.role));
    d.set(jinja::Value("content"), jinja::Value(m.content));
    list.push_back(jinja::Value::dict(std::move(d)));
  }
  return render_vars(jinja::Value::list(std::move(list)), opts, jinja::Dict());
}

std::string ChatTemplate::render_json(const nlohmann::ordered_json& messages,
                                      const ChatRenderOptions& opts,
                                      const nlohmann::ordered_json* extra) const {
  if (!messages.is_array()) throw ConfigError("chat messages must be a JSON array");
  jinja::Dict vars;
  jinja::Value list;
  try {
    if (extra) {
      if (!extra->is_object()) {
        throw ConfigError("extra chat template variables must be a JSON object");
      }
      for (const auto& [k, v] : extra->items()) vars.set(jinja::Value(k), jinja::from_json(v));
    }
    list = jinja::from_json(messages);
  } catch (const jinja::ValueError& e) {
    throw ConfigError(std::string("chat messages: ") + e.what());
  }
  return render_vars(list, opts, vars);
}

std::string ChatTemplate::render_vars(const jinja::Value& messages, const ChatRenderOptions& opts,
                                      const jinja::Dict& extra) const {
  jinja::Dict vars;
  vars.set(jinja::Value("messages"), messages);
  vars.set(jinja::Value("add_generation_prompt"), jinja::Value(opts.add_generation_prompt));
  vars.set(jinja::Value("bos_token"), jinja::Value(opts.bos_token));
  vars.set(jinja::Value("eos_token"), jinja::Value(opts.eos_token));
  for (const auto& [k, v] : extra.entries()) vars.set(k, v);
  return tmpl_.render(vars, opts.render);
}

std::optional<std::string_view> detect_chat_template_family(std::string_view s) {
  auto has = [s](std::string_view marker) { return s.find(marker) != std::string_view::npos; };
  if (has("<|im_start|>")) return "chatml";
  if (has("<|start_header_id|>")) return "llama3";
  if (has("<start_of_turn>")) return "gemma";
  if (has("<|user|>")) return has("<|end|>") ? "phi3" : "zephyr";
  if (has("[INST]")) return has("<<SYS>>") ? "llama2" : "mistral";
  return std::nullopt;
}

std::optional<std::string_view> detect_chat_template_family(const Vocab& vocab) {
  auto has = [&vocab](std::string_view token) { return vocab.find(token) != kNoToken; };
  if (has("<|im_start|>")) return "chatml";
  if (has("<|start_header_id|>")) return "llama3";
  if (has("<start_of_turn>")) return "gemma";
  if (has("<|user|>")) return has("<|end|>") ? "phi3" : "zephyr";
  if (has("[INST]")) return "mistral";
  return std::nullopt;
}

std::optional<std::string> chat_template_from_gguf(const GgufFile& file) {
  return file.get_str("tokenizer.chat_template");
}

ResolvedChatTemplate resolve_chat_template(const std::optional<std::string>& model_template,
                                           std::string_view override_spec, const Vocab* vocab) {
  if (!override_spec.empty()) {
    if (builtin_chat_template_source(override_spec)) {
      return {ChatTemplate::builtin(override_spec), "override", ""};
    }
    std::ifstream in{std::string(override_spec), std::ios::binary};
    if (!in) {
      std::string known;
      for (std::string_view n : builtin_chat_template_names()) {
        known += known.empty() ? "" : ", ";
        known += n;
      }
      throw ConfigError("chat template '" + std::string(override_spec) +
                        "' is neither a built-in (" + known + ") nor a readable file");
    }
    std::ostringstream text;
    text << in.rdbuf();
    return {ChatTemplate(text.str(), std::string(override_spec)), "override", ""};
  }
  if (model_template && !model_template->empty()) {
    try {
      return {ChatTemplate(*model_template, "model chat template"), "model", ""};
    } catch (const jinja::TemplateError& e) {
      std::optional<std::string_view> family = detect_chat_template_family(*model_template);
      if (!family && vocab) family = detect_chat_template_family(*vocab);
      const std::string name(family.value_or("chatml"));
      return {ChatTemplate::builtin(name), family ? "detected" : "default",
              "the model's chat template cannot be used (" + std::string(e.what()) +
                  "); using the built-in '" + name + "' template instead"};
    }
  }
  const std::optional<std::string_view> family =
      vocab ? detect_chat_template_family(*vocab) : std::nullopt;
  const std::string name(family.value_or("chatml"));
  return {ChatTemplate::builtin(name), family ? "detected" : "default",
          "the model has no chat template; using the built-in '" + name + "' template"};
}

}  // namespace pagellm
