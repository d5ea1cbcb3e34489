#include "server/chat_prompt.h"

#include "gguf/gguf_reader.h"

namespace pagellm {

namespace {

class ChatMlPrompt : public ChatPrompt {
 public:
  std::string render(const std::vector<ChatMessage>& messages) const override {
    std::string out;
    for (const auto& m : messages) {
      out += "<|im_start|>";
      out += m.role;
      out += '\n';
      out += m.content;
      out += "<|im_end|>\n";
    }
    out += "<|im_start|>assistant\n";
    return out;
  }
  std::string name() const override { return "chatml (built-in)"; }
};

}  // namespace

std::unique_ptr<ChatPrompt> ChatPrompt::chatml() {
  return std::make_unique<ChatMlPrompt>();
}

std::unique_ptr<ChatPrompt> ChatPrompt::for_model(const GgufFile& file) {
  (void)file;
  return chatml();
}

}  // namespace pagellm
