// prepare_completion (declared in openai_request.h): a parsed request made
// into engine requests - the template rendered, tools and reasoning turned
// into grammars and reply handling, the prompt tokenized and checked.
#include <fmt/format.h>

#include "grammar/grammar.h"
#include "grammar/grammar_cache.h"
#include "server/api_error.h"
#include "server/harmony.h"
#include "server/openai_request.h"
#include "server/token_ids.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pagellm {

namespace {

nlohmann::ordered_json messages_json_of(const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

}  // namespace

PreparedCompletion prepare_completion(const CompletionRequest& req, const Tokenizer& tokenizer,
                                      const ChatPrompt& chat, const ModelLimits& limits) {
  std::vector<std::vector<int32_t>> prompts;
  const char* prompt_param = req.endpoint == Endpoint::kChat ? "messages" : "prompt";
  PreparedCompletion out;
  std::shared_ptr<const Grammar> tool_grammar;
  std::string tool_gbnf;
  RenderedPrompt rendered;
  const bool server_kwargs = chat.template_kwargs().is_object() && !chat.template_kwargs().empty();
  if (req.endpoint == Endpoint::kChat && (!req.messages_json.is_null() || server_kwargs)) {
    const ToolFormat format = tool_format_of(chat.source());
    rendered = chat.render_with_tools(
        req.messages_json.is_null() ? messages_json_of(req.messages) : req.messages_json,
        req.tools_json, req.tools, req.template_kwargs);
    prompts.push_back(tokenizer.encode(rendered.text, /*add_special=*/rendered.add_bos,
                                       /*parse_special=*/true));
    if (!req.tools.empty() && req.tool_choice != CompletionRequest::ToolChoice::kNone) {
      out.parse_tools = true;
      out.tool_format = format;
      out.tools = req.tools;
      // Harmony's calls are special-token headers a byte grammar cannot force:
      // they are parsed from the reply's commentary channel, as with auto.
      if (req.tool_choice != CompletionRequest::ToolChoice::kAuto &&
          !template_writes_harmony(chat.source())) {
        std::vector<ToolSpec> chosen;
        for (const auto& t : req.tools)
          if (req.tool_choice != CompletionRequest::ToolChoice::kNamed || t.name == req.tool_name)
            chosen.push_back(t);
        try {
          // A named function is one call of it (OpenAI's forced call); only
          // `required` may make several, when parallel_tool_calls allows.
          const bool parallel = req.parallel_tool_calls &&
                                req.tool_choice == CompletionRequest::ToolChoice::kRequired;
          tool_gbnf = tool_call_gbnf(format, chosen, parallel);
          tool_grammar = compile_grammar_shared(tool_gbnf);
        } catch (const Error& e) {
          bad_request("tools",
                      fmt::format("the tools' parameters cannot be enforced: {}", e.what()));
        }
      }
    }
  } else if (req.endpoint == Endpoint::kChat) {
    rendered = chat.render(req.messages);
    prompts.push_back(tokenizer.encode(rendered.text, /*add_special=*/rendered.add_bos,
                                       /*parse_special=*/true));
  } else {
    for (size_t i = 0; i < req.prompts.size(); ++i) {
      const PromptInput& p = req.prompts[i];
      if (!p.is_tokens) {
        prompts.push_back(tokenizer.encode(p.text, /*add_special=*/true));
        continue;
      }
      prompts.push_back(checked_token_ids(p.tokens, limits.n_vocab, prompt_param));
    }
  }
  for (const auto& [id, bias] : req.sampling.logit_bias)
    if (id >= limits.n_vocab)
      bad_request("logit_bias",
                  fmt::format("'logit_bias' token id {} is outside the vocabulary (0..{})", id,
                              limits.n_vocab - 1),
                  "invalid_token_id");

  std::shared_ptr<const Grammar> grammar = tool_grammar ? tool_grammar : req.grammar;
  const ReasoningFormat reasoning = req.reasoning_format.value_or(chat.reasoning_format());
  const bool harmony = req.endpoint == Endpoint::kChat && template_writes_harmony(chat.source());
  if (harmony && reasoning != ReasoningFormat::kNone) out.harmony = true;
  if (!harmony && req.endpoint == Endpoint::kChat && chat.think_syntax() &&
      reasoning != ReasoningFormat::kNone) {
    out.think = chat.think_syntax();
    out.thought_open_in_prompt = prompt_opens_thought(rendered.text, *out.think);
    out.keep_thought_in_content = reasoning == ReasoningFormat::kDeepseekLegacy;
    // A forced call or a schema still lets the model think first.
    const std::string& gbnf = tool_grammar ? tool_gbnf : req.grammar_gbnf;
    if (grammar && !gbnf.empty()) {
      try {
        grammar = compile_grammar_shared(
            gbnf_after_thought(gbnf, *out.think, out.thought_open_in_prompt), kThoughtStartRule);
      } catch (const Error& e) {
        bad_request("", fmt::format("the output constraint cannot follow a thought: {}", e.what()));
      }
    }
  }

  for (auto& ids : prompts) {
    const int64_t n_prompt = static_cast<int64_t>(ids.size());
    if (n_prompt == 0) bad_request(prompt_param, "the prompt is empty (no tokens)");
    if (n_prompt >= limits.max_context)
      bad_request(
          prompt_param,
          fmt::format("This model's maximum context length is {} tokens, but the prompt is {} "
                      "tokens (at least one must be left for the completion).",
                      limits.max_context, n_prompt),
          "context_length_exceeded");
    int64_t max_tokens;
    if (req.max_tokens) {
      max_tokens = *req.max_tokens;
      if (n_prompt + max_tokens > limits.max_context)
        bad_request(
            "max_tokens",
            fmt::format("This model's maximum context length is {} tokens, but {} tokens were "
                        "requested ({} in the prompt, {} for the completion).",
                        limits.max_context, n_prompt + max_tokens, n_prompt, max_tokens),
            "context_length_exceeded");
    } else {
      max_tokens = req.endpoint == Endpoint::kChat
                       ? limits.max_context - n_prompt
                       : std::min<int64_t>(16, limits.max_context - n_prompt);
    }
    Request r;
    r.prompt = std::move(ids);
    r.sampling = req.sampling;
    r.max_tokens = static_cast<int32_t>(max_tokens);
    r.n = req.n;
    r.ignore_eos = req.ignore_eos;
    r.stop = req.stop;
    r.logprobs = req.logprobs;
    r.grammar = grammar;
    r.special_text = out.harmony;
    try {
      r.sampling.validate();
    } catch (const ConfigError& e) {
      bad_request("", e.what());
    }
    out.prompt_tokens.push_back(n_prompt);
    out.requests.push_back(std::move(r));
  }
  return out;
}

}  // namespace pagellm
