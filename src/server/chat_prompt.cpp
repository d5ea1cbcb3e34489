#include "server/chat_prompt.h"

#include "server/openai_request.h"
#include "jinja/jinja_error.h"
#include "tokenizer/vocab.h"

namespace pagellm {

ChatPrompt::ChatPrompt(ResolvedChatTemplate resolved, ChatRenderOptions options)
    : tmpl_(std::move(resolved.tmpl)),
      origin_(std::move(resolved.origin)),
      warning_(std::move(resolved.warning)),
      options_(std::move(options)) {
  options_.add_generation_prompt = true;
}

std::unique_ptr<ChatPrompt> ChatPrompt::for_model(const GgufFile& file, const Vocab& vocab,
                                                  std::string_view override_spec) {
  auto resolved = resolve_chat_template(chat_template_from_gguf(file), override_spec, &vocab);
  return std::unique_ptr<ChatPrompt>(
      new ChatPrompt(std::move(resolved), ChatRenderOptions::for_vocab(vocab)));
}

RenderedPrompt ChatPrompt::render(const std::vector<ChatMessage>& messages) const {
  RenderedPrompt out;
  try {
    out.text = tmpl_.render(messages, options_);
  } catch (const jinja::TemplateRaised& e) {
    throw ApiError(400, "the chat template refused the messages: " + e.message(),
                   "invalid_request_error", "messages");
  } catch (const jinja::TemplateError& e) {
    throw ApiError(400, std::string("the chat template failed on the messages: ") + e.what(),
                   "invalid_request_error", "messages");
  }
  // Templates that write {{ bos_token }} already start with it.
  const std::string& bos = options_.bos_token;
  out.add_bos = bos.empty() || out.text.compare(0, bos.size(), bos) != 0;
  return out;
}

std::string ChatPrompt::description() const {
  return tmpl_.name() + " (" + origin_ + ")";
}

}  // namespace pagellm
