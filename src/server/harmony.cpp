#include "server/harmony.h"

#include <algorithm>
#include <array>

namespace pagellm {

namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::array<std::string_view, 4> kBodyEnds = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

// The word after `key` in a header (up to a space or a marker), or "".
std::string header_word(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return "";
  size_t from = at + key.size(), to = from;
  while (to < header.size() && header[to] != ' ' && header[to] != '<') ++to;
  return std::string(header.substr(from, to - from));
}

// Bytes at the end of `s` that may begin a marker ("<|...") with more text.
size_t partial_marker(std::string_view s) {
  const size_t lt = s.rfind('<');
  if (lt == std::string_view::npos || s.find('>', lt) != std::string_view::npos) return 0;
  const std::string_view tail = s.substr(lt);
  if (tail.size() > 12 || (tail.size() >= 2 && tail[1] != '|')) return 0;
  return tail.size();
}

// Whether `s` may be the start of a header (a marker or " to=").
bool may_open_header(std::string_view s) {
  for (std::string_view opener : {std::string_view("<|"), std::string_view(" to=")}) {
    const size_t n = std::min(s.size(), opener.size());
    if (s.substr(0, n) == opener.substr(0, n)) return true;
  }
  return false;
}

}  // namespace

bool template_writes_harmony(std::string_view src) {
  return src.find("<|channel|>") != std::string_view::npos &&
         src.find("<|message|>") != std::string_view::npos;
}

ReplySplitter::Delta HarmonySplitter::push(std::string_view text) {
  Delta out;
  pending_ += text;
  run(out, false);
  return out;
}

ReplySplitter::Delta HarmonySplitter::finish() {
  Delta out;
  run(out, true);
  if (!recipient_.empty() && recipient_.rfind("functions.", 0) == 0)
    calls_.push_back({recipient_.substr(10), call_body_});
  recipient_.clear();
  return out;
}

void HarmonySplitter::end_header(const std::string& header) {
  channel_ = header_word(header, "<|channel|>");
  recipient_ = header_word(header, "to=");
  call_body_.clear();
}

void HarmonySplitter::emit(Delta& out, std::string_view body) {
  if (body.empty()) return;
  if (recipient_.rfind("functions.", 0) == 0)
    call_body_.append(body);
  else if (channel_ == "analysis")
    out.reasoning.append(body);
  else
    out.content.append(body);  // final, a commentary preamble, or text without a header
}

void HarmonySplitter::run(Delta& out, bool at_end) {
  for (;;) {
    const std::string_view p = pending_;
    if (state_ == State::kHeader) {
      if (p.empty()) return;
      // Decided on the first bytes alone (a later <|message|> must not turn
      // text already read as plain into a header: the pieces' cuts would show).
      if (!may_open_header(p)) {
        // Plain text: the model answered without a header.
        channel_ = "final";
        recipient_.clear();
        state_ = State::kBody;
        continue;
      }
      const size_t at = p.find(kMessage);
      if (at != std::string_view::npos) {
        end_header(std::string(p.substr(0, at)));
        pending_.erase(0, at + kMessage.size());
        state_ = State::kBody;
        continue;
      }
      if (at_end) pending_.clear();  // a header cut off: nothing to show
      return;
    }
    size_t end = std::string_view::npos, end_len = 0;
    for (std::string_view e : kBodyEnds) {
      const size_t at = p.find(e);
      if (at < end) {
        end = at;
        end_len = e == "<|start|>" ? 0 : e.size();  // <|start|> opens the next header
      }
    }
    if (end != std::string_view::npos) {
      emit(out, p.substr(0, end));
      if (recipient_.rfind("functions.", 0) == 0) calls_.push_back({recipient_.substr(10), call_body_});
      recipient_.clear();
      channel_.clear();
      pending_.erase(0, end + end_len);
      state_ = State::kHeader;
      continue;
    }
    const size_t keep = at_end ? 0 : partial_marker(p);
    emit(out, p.substr(0, p.size() - keep));
    pending_.erase(0, p.size() - keep);
    return;
  }
}

}  // namespace pagellm
