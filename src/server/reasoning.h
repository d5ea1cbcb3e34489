// Reasoning ("thinking") in replies: models such as Qwen3 and DeepSeek-R1
// write their thoughts in a <think>...</think> block before the answer.
// Clients expect that block apart from the answer: `reasoning_content` in
// Chat Completions, a `reasoning` output item in Responses, `thinking`
// content blocks in Anthropic's Messages API.
//
// Formats, as llama-server names them (--reasoning-format, or a request's
// `reasoning_format`):
//   none            the thought stays in the content, tags and all
//   auto, deepseek  the thought is split off (auto is deepseek here)
//   deepseek-legacy the thought is split off and also kept in the content
//
// Which templates reason: those whose source writes the think tags. Some
// open the block in the prompt (DeepSeek-R1's "<｜Assistant｜><think>\n",
// Qwen3.5 with thinking on): the reply then starts inside the thought,
// which ReasoningSplitter is told. Other reasoning syntaxes (gpt-oss's
// harmony channels) would be further ThinkSyntax kinds.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_calls.h"

namespace pagellm {

enum class ReasoningFormat { kNone, kAuto, kDeepseek, kDeepseekLegacy };

// "none", "auto", "deepseek", "deepseek-legacy"; nullopt for anything else.
std::optional<ReasoningFormat> reasoning_format_from(std::string_view name);
const char* reasoning_format_name(ReasoningFormat f);

struct ThinkSyntax {
  std::string open = "<think>";
  std::string close = "</think>";
};

// The think tags a chat template writes; nullopt for templates that do not reason.
std::optional<ThinkSyntax> think_syntax_of(std::string_view template_source);

// Whether a rendered prompt ends inside an open think block (the template
// opened it for the reply), ignoring trailing whitespace.
bool prompt_opens_thought(std::string_view prompt, const ThinkSyntax& syntax);

// A grammar for a reasoning reply: `gbnf`'s texts (its rule root) after a
// thought, which the reply must open (or, opened in the prompt, close)
// first; optional when the prompt did not open it. Its start rule is
// kThoughtStartRule. The thought may not contain the closing tag's first two
// bytes except as that tag.
inline constexpr const char* kThoughtStartRule = "pagellm-thought-start";
std::string gbnf_after_thought(const std::string& gbnf, const ThinkSyntax& syntax,
                               bool opened_in_prompt);

// Reads a reply as it streams in: thought apart from answer (and, for
// formats that carry them in their own channel, tool calls).
class ReplySplitter {
 public:
  struct Delta {
    std::string reasoning;
    std::string content;
  };
  virtual ~ReplySplitter() = default;
  virtual Delta push(std::string_view text) = 0;
  // The end of the reply: what was held back.
  virtual Delta finish() = 0;
  // Calls the reply made in a channel of their own (empty: calls are in the answer).
  virtual std::vector<ParsedToolCall> tool_calls() const { return {}; }
};

// Splits a reply, as it streams in, into thought and answer. Only a think
// block at the start of the reply counts (leading whitespace allowed); the
// thought loses the whitespace around it, the answer the whitespace after
// the closing tag. Text that may still turn out to be a tag is held back
// until the next push or finish(). A reply that ends inside the block is all
// thought.
class ReasoningSplitter final : public ReplySplitter {
 public:
  // `keep_in_content`: deepseek-legacy, the content also gets the raw text.
  ReasoningSplitter(ThinkSyntax syntax, bool opened_in_prompt, bool keep_in_content = false);

  Delta push(std::string_view text) override;
  Delta finish() override;

  // Everything split so far (held-back text excluded until finish()).
  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }

 private:
  enum class State { kStart, kThinking, kAfterThought, kAnswer };
  void run(Delta& out, bool at_end);
  void emit_reasoning(Delta& out, std::string_view text);
  void emit_content(Delta& out, std::string_view text);

  ThinkSyntax syntax_;
  bool keep_in_content_;
  State state_;
  std::string pending_;     // not yet classified
  std::string held_space_;  // whitespace inside the thought, sent once more thought follows
  bool thought_started_ = false;
  std::string reasoning_, content_;
};

}  // namespace pagellm
