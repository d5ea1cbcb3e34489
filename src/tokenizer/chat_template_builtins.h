// The built-in chat templates, as Jinja sources (the same text as
// tests/data/chat-templates/builtin/NAME.jinja, which a test keeps in step):
//
//   chatml   <|im_start|>ROLE\nCONTENT<|im_end|>\n ...            prompt: <|im_start|>assistant\n
//   llama2   <s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ANSWER </s>   (bos/eos tokens)
//   llama3   <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ...
//   mistral  <s>[INST] SYSTEM\n\nUSER [/INST]ANSWER</s>[INST] ...
//   zephyr   <|ROLE|>\nCONTENT</s>\n ...                          prompt: <|assistant|>\n
//   phi3     <|ROLE|>\nCONTENT<|end|>\n ...                       prompt: <|assistant|>\n
//   gemma    <start_of_turn>user\nCONTENT<end_of_turn>\n ... (assistant -> model; a
//            system message is put before the first user message)
// llama2, mistral and gemma require user/assistant turns to alternate.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace pagellm {

// The names, in the order above.
const std::vector<std::string_view>& builtin_chat_template_names();
// The Jinja source of a built-in, or nullopt.
std::optional<std::string_view> builtin_chat_template_source(std::string_view name);

}  // namespace pagellm
