// Turns chat messages into the prompt text the model expects.
//
// ChatPrompt is the server's seam to chat templates: for_model() picks the
// renderer for a model; until the tokenizer layer renders the model's own
// `tokenizer.chat_template`, every model gets ChatML:
//   <|im_start|>ROLE\nCONTENT<|im_end|>\n ... <|im_start|>assistant\n
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace pagellm {

class GgufFile;

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

class ChatPrompt {
 public:
  virtual ~ChatPrompt() = default;
  // The renderer for the model in `file`.
  static std::unique_ptr<ChatPrompt> for_model(const GgufFile& file);
  static std::unique_ptr<ChatPrompt> chatml();

  // The conversation, ending with the prompt for the assistant's reply.
  // Throws ApiError (400) for a conversation the template refuses.
  virtual std::string render(const std::vector<ChatMessage>& messages) const = 0;
  // Whether the rendered text brings its own BOS (then encode without adding one).
  virtual bool renders_bos() const { return false; }
  // A short description for logs ("chatml (built-in)").
  virtual std::string name() const = 0;
};

}  // namespace pagellm
