// Anthropic's Messages API request parsing (POST /v1/messages and
// /v1/messages/count_tokens) without a model. Byte 0: odd for count_tokens;
// the rest is the body, through parse_anthropic_request, then
// prepare_completion (or the token count) on the shipped model's vocabulary
// and template, and AnthropicOutput's message and events for a made-up reply.
#include <string>

#include "entries/fuzz_entries.h"
#include "entries/shipped_model.h"
#include "server/anthropic_api.h"
#include "util/error.h"

namespace pagellm::fuzz {

int anthropic_request(const uint8_t* data, size_t size) {
  const ShippedModel& v = shipped_model();
  if (size < 1) return 0;
  const bool count_only = data[0] & 1;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  AnthropicRequest req;
  try {
    req = parse_anthropic_request(body, count_only);
  } catch (const ApiError& e) {
    if (e.status != 400) violated("a bad body must be refused with a 400");
    return 0;
  }
  if (!count_only && req.max_tokens < 1) violated("max_tokens < 1 accepted");
  try {
    if (count_only) {
      if (count_prompt_tokens(req.chat, *v.tok, *v.chat) < 0) violated("a negative token count");
      return 0;
    }
    check_prepared(prepare_completion(req.chat, *v.tok, *v.chat, v.limits), v.limits);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) violated("a bad request must be refused with a 4xx");
    return 0;
  }
  AnthropicOutput out("m");
  ChoiceResult c;
  c.text = "a reply";
  c.finish_reason = FinishReason::kStop;
  c.stop_sequence = req.chat.stop.empty() ? "" : req.chat.stop.front();
  const auto message = out.full({c}, Usage{3, 1, 0});
  if (message["stop_reason"] != (c.stop_sequence.empty() ? "end_turn" : "stop_sequence"))
    violated("stop_reason does not follow the stop sequence");
  if (!req.chat.tools.empty()) {
    // A call to the first tool, as the session would hand it over.
    c.tool_calls = {{"call_0123456789abcdef01234567", req.chat.tools.front().name, "{}"}};
    c.finish_reason = FinishReason::kToolCalls;
    c.reasoning = "a thought";
    AnthropicOutput calls("m");
    const auto m = calls.full({c}, Usage{3, 1, 0});
    if (m["stop_reason"] != "tool_use" || m["content"].back()["type"] != "tool_use" ||
        m["content"].back()["id"] != "toolu_0123456789abcdef01234567" ||
        m["content"].front()["type"] != "thinking")
      violated("a tool call is not a tool_use block after the thinking block");
  }
  return 0;
}

}  // namespace pagellm::fuzz
