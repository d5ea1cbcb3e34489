#include "server/sse.h"

#include "server/openai_response.h"

namespace pagellm {

std::string sse_data(const nlohmann::ordered_json& payload) {
  // dump_json never emits a raw newline (strings escape it), so one line holds the event.
  return "data: " + dump_json(payload) + "\n\n";
}

std::string sse_event(std::string_view name, const nlohmann::ordered_json& payload) {
  return "event: " + std::string(name) + "\n" + sse_data(payload);
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

std::string sse_comment(std::string_view text) {
  std::string out = ": ";
  for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
  out += "\n\n";
  return out;
}

}  // namespace pagellm
