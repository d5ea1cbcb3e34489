// OpenAI's "harmony" reply format (gpt-oss): a reply is a run of messages,
// each a header and a body:
//   [<|start|>assistant] [ to=RECIPIENT] <|channel|>CHANNEL [ to=RECIPIENT]
//   [ <|constrain|>json | json] <|message|>BODY (<|end|> | <|call|> | <|return|>)
// The prompt's generation opening writes the first "<|start|>assistant".
// Channels: `analysis` (the thought), `final` (the answer), `commentary`
// (tool calls when addressed to functions.NAME, else a preamble the user may
// see). HarmonySplitter reads a streamed reply into thought, answer and tool
// calls; text outside any header is answer text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace pagellm {

// Whether a chat template writes harmony (its source has the channel markers).
bool template_writes_harmony(std::string_view template_source);

class HarmonySplitter final : public ReplySplitter {
 public:
  Delta push(std::string_view text) override;
  Delta finish() override;
  // The calls addressed to functions.NAME, in order (arguments: the body).
  std::vector<ParsedToolCall> tool_calls() const override { return calls_; }

 private:
  enum class State { kHeader, kBody };
  void run(Delta& out, bool at_end);
  void end_header(const std::string& header);
  void emit(Delta& out, std::string_view body);

  State state_ = State::kHeader;
  std::string pending_;
  std::string channel_, recipient_;
  std::string call_body_;  // the open call's arguments
  std::vector<ParsedToolCall> calls_;
};

}  // namespace pagellm
