// OpenAI-compatible request bodies: parsing and validation of
// /v1/chat/completions and /v1/completions into what the engine needs.
//
// Parsing is strict about types and ranges (each failure is an ApiError with
// status 400 naming the parameter) and lenient about fields it does not know
// (ignored, as most OpenAI-compatible servers do), except those whose silent
// omission would change the result (echo, suffix, functions, ...),
// which are refused as unsupported. `null` means "absent" for every optional
// field.
//
// Sampling defaults are OpenAI's: temperature 1, top_p 1, no top_k or min_p;
// the repetition penalty (an extension, off by default) looks at the whole
// history. Without a seed, each request draws a random one. The server then
// replaces the fields a body left out with its own defaults (serve's flags,
// the model's general.sampling.* keys: engine/sampling_defaults.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/sampling_defaults.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"
#include "util/error.h"

namespace pagellm {

class Tokenizer;

enum class Endpoint { kChat, kCompletion };

// One prompt of /v1/completions: text, or token ids.
struct PromptInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int64_t> tokens;  // range-checked against the vocabulary in prepare()
};

// A prompt field of a request body: /v1/completions' "prompt", /v1/embeddings'
// "input".
struct PromptField {
  const char* key;
  const char* array_noun;  // for errors: "a prompt array"
  bool refuse_empty_text = false;
  size_t max_items = SIZE_MAX;  // in an array of texts or of token-id arrays
};

// body[field.key]: a string, an array of token ids, an array of strings or an
// array of token-id arrays, one PromptInput each; else ApiError 400 naming it.
std::vector<PromptInput> parse_prompt_inputs(const nlohmann::json& body, const PromptField& field);

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::vector<ChatMessage> messages;  // chat
  std::vector<PromptInput> prompts;   // completions (one or more)
  SamplingParams sampling;
  // Which sampling fields the body gave: the others hold OpenAI's defaults
  // until the server's own (serve --temp ..., the model's) replace them
  // (SamplingDefaults::fill).
  SamplingFields sampling_given;
  std::optional<int64_t> max_tokens;
  int32_t n = 1;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  int32_t logprobs = -1;  // -1 off; else how many alternatives per token
  bool ignore_eos = false;
  // Constrained output: from `grammar` (GBNF, llama-server's extension),
  // `response_format` json_object / json_schema, or `json_schema`
  // (llama-server's); null when the output is free text.
  std::shared_ptr<const Grammar> grammar;
  // A schema's grammar text: reasoning replies may think before it (a raw
  // `grammar` is the whole reply and stays as it is: empty here).
  std::string grammar_gbnf;
  // Tool calling (chat): the tools, as given (for the template) and parsed;
  // tool_choice; and the conversation as the template sees it (tool calls
  // and tool results included) when there are tools or tool messages.
  nlohmann::ordered_json tools_json;
  std::vector<ToolSpec> tools;
  enum class ToolChoice { kNone, kAuto, kRequired, kNamed } tool_choice = ToolChoice::kAuto;
  std::string tool_name;  // kNamed
  bool parallel_tool_calls = true;
  // null unless tools, tool messages, past reasoning (`reasoning_content`)
  // or template variables are present.
  nlohmann::ordered_json messages_json;
  // Reasoning: the request's `reasoning_format` (else the server's), and
  // `chat_template_kwargs` (extra template variables such as enable_thinking,
  // over the server's --chat-template-kwargs).
  std::optional<ReasoningFormat> reasoning_format;
  nlohmann::ordered_json template_kwargs;  // null or an object
};

// Parses a request body. Throws ApiError (400) for malformed JSON, a body that
// is not an object, wrong types, unknown roles, empty messages, out-of-range
// parameters and unsupported features.
CompletionRequest parse_completion_request(const std::string& body, Endpoint endpoint);

// Parses a Chat Completions body that another API's parser built from its
// own request (the Responses and Anthropic Messages APIs reuse this parser,
// its grammar and tool handling). Errors name that API's parameters:
// `renames` maps a chat parameter name to the API's own, in the param and the
// message.
CompletionRequest parse_translated_chat(
    const nlohmann::ordered_json& chat_body,
    const std::vector<std::pair<std::string, std::string>>& renames);

// The engine requests of a parsed request (one per prompt), tokenized and
// checked against the vocabulary and the context.
struct PreparedCompletion {
  std::vector<Request> requests;
  std::vector<int64_t> prompt_tokens;  // per request
  // Replies are searched for tool calls in this format (tools given and
  // tool_choice not none).
  bool parse_tools = false;
  ToolFormat tool_format = ToolFormat::kHermes;
  std::vector<ToolSpec> tools;
  // Replies are split into thought and answer (a reasoning template and a
  // format other than none); the prompt may have opened the thought.
  std::optional<ThinkSyntax> think;
  bool harmony = false;  // a harmony template (gpt-oss): channels, not think tags
  bool thought_open_in_prompt = false;
  bool keep_thought_in_content = false;  // deepseek-legacy
};

struct ModelLimits {
  int32_t n_vocab = 0;
  int64_t max_context = 0;  // tokens, prompt + completion
};

// Throws ApiError (400): empty prompt, token id outside the vocabulary,
// prompt over the context ("context_length_exceeded": the message names the
// context and the request's size).
PreparedCompletion prepare_completion(const CompletionRequest& req, const Tokenizer& tokenizer,
                                      const ChatPrompt& chat, const ModelLimits& limits);

}  // namespace pagellm
