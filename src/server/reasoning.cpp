#include "server/reasoning.h"

#include <algorithm>

namespace pagellm {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

size_t skip_space(std::string_view s, size_t from = 0) {
  while (from < s.size() && is_space(s[from])) ++from;
  return from;
}

// The length of the longest suffix of `s` that is a proper prefix of `tag`:
// bytes that may become the tag with the next piece.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ReasoningFormat> reasoning_format_from(std::string_view name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "auto") return ReasoningFormat::kAuto;
  if (name == "deepseek") return ReasoningFormat::kDeepseek;
  if (name == "deepseek-legacy") return ReasoningFormat::kDeepseekLegacy;
  return std::nullopt;
}

const char* reasoning_format_name(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::kNone: return "none";
    case ReasoningFormat::kAuto: return "auto";
    case ReasoningFormat::kDeepseek: return "deepseek";
    case ReasoningFormat::kDeepseekLegacy: return "deepseek-legacy";
  }
  return "auto";
}

std::optional<ThinkSyntax> think_syntax_of(std::string_view template_source) {
  ThinkSyntax s;
  if (template_source.find(s.open) == std::string_view::npos ||
      template_source.find(s.close) == std::string_view::npos)
    return std::nullopt;
  return s;
}

bool prompt_opens_thought(std::string_view prompt, const ThinkSyntax& syntax) {
  size_t end = prompt.size();
  while (end > 0 && is_space(prompt[end - 1])) --end;
  const std::string_view trimmed = prompt.substr(0, end);
  return trimmed.size() >= syntax.open.size() &&
         trimmed.substr(trimmed.size() - syntax.open.size()) == syntax.open;
}

namespace {

std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string gbnf_not(char c) {
  return (c == ']' || c == '\\' || c == '^' || c == '-') ? std::string("[^\\") + c + "]"
                                                       : std::string("[^") + c + "]";
}

}  // namespace

std::string gbnf_after_thought(const std::string& gbnf, const ThinkSyntax& syntax,
                               bool opened_in_prompt) {
  const std::string& close = syntax.close;
  const std::string body =
      close.size() >= 2 ? gbnf_not(close[0]) + " | " + gbnf_literal(close.substr(0, 1)) + " " +
                              gbnf_not(close[1])
                        : gbnf_not(close[0]);
  std::string out = gbnf;
  out += "\npagellm-thought-text ::= (" + body + ")*\n";
  const std::string thought =
      "pagellm-thought-text " + gbnf_literal(close) + " [ \\t\\r\\n]*";
  if (opened_in_prompt)
    out += std::string(kThoughtStartRule) + " ::= " + thought + " root\n";
  else
    out += std::string(kThoughtStartRule) + " ::= ([ \\t\\r\\n]* " + gbnf_literal(syntax.open) +
           " " + thought + ")? root\n";
  return out;
}

ReasoningSplitter::ReasoningSplitter(ThinkSyntax syntax, bool opened_in_prompt, bool keep_in_content)
    : syntax_(std::move(syntax)),
      keep_in_content_(keep_in_content),
      state_(opened_in_prompt ? State::kThinking : State::kStart) {}

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text) {
  Delta out;
  pending_ += text;
  run(out, false);
  if (keep_in_content_) {
    out.content = std::string(text);
    content_ += text;
  }
  return out;
}

ReasoningSplitter::Delta ReasoningSplitter::finish() {
  Delta out;
  run(out, true);
  if (keep_in_content_) out.content.clear();  // every byte already went out raw
  return out;
}

void ReasoningSplitter::emit_reasoning(Delta& out, std::string_view text) {
  if (!thought_started_) {
    const size_t first = skip_space(text);
    text.remove_prefix(first);
    if (text.empty()) return;
    thought_started_ = true;
  }
  // Trailing whitespace waits: the thought's last newline before the closing tag is not part of it.
  size_t end = text.size();
  while (end > 0 && is_space(text[end - 1])) --end;
  if (end > 0) {
    out.reasoning += held_space_;
    reasoning_ += held_space_;
    held_space_.clear();
    out.reasoning.append(text.substr(0, end));
    reasoning_.append(text.substr(0, end));
  }
  held_space_.append(text.substr(end));
}

void ReasoningSplitter::emit_content(Delta& out, std::string_view text) {
  if (keep_in_content_ || text.empty()) return;
  out.content.append(text);
  content_.append(text);
}

void ReasoningSplitter::run(Delta& out, bool at_end) {
  for (;;) {
    const std::string_view p = pending_;
    switch (state_) {
      case State::kStart: {
        const size_t first = skip_space(p);
        const std::string_view rest = p.substr(first);
        if (rest.size() >= syntax_.open.size() && rest.substr(0, syntax_.open.size()) == syntax_.open) {
          pending_.erase(0, first + syntax_.open.size());
          state_ = State::kThinking;
          continue;
        }
        const bool may_be_tag = syntax_.open.compare(0, rest.size(), rest) == 0;
        if (may_be_tag && !at_end) return;  // whitespace or part of the tag so far
        state_ = State::kAnswer;
        continue;
      }
      case State::kThinking: {
        const size_t at = p.find(syntax_.close);
        if (at != std::string_view::npos) {
          emit_reasoning(out, p.substr(0, at));
          held_space_.clear();
          pending_.erase(0, at + syntax_.close.size());
          state_ = State::kAfterThought;
          continue;
        }
        const size_t keep = at_end ? 0 : partial_tag_suffix(p, syntax_.close);
        emit_reasoning(out, p.substr(0, p.size() - keep));
        pending_.erase(0, p.size() - keep);
        return;
      }
      case State::kAfterThought: {
        const size_t first = skip_space(p);
        pending_.erase(0, first);
        if (pending_.empty()) return;
        state_ = State::kAnswer;
        continue;
      }
      case State::kAnswer:
        emit_content(out, p);
        pending_.clear();
        return;
    }
  }
}

}  // namespace pagellm
