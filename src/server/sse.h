// Server-sent events as the OpenAI streaming API frames them: one
// "data: JSON" event per chunk, a final "data: [DONE]", and comments (lines
// starting with ':', ignored by clients) as keep-alives; named events for
// the Responses and Anthropic streams.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace pagellm {

std::string sse_data(const nlohmann::ordered_json& payload);
std::string sse_done();
// A named event ("event: NAME" then "data: JSON"), as the Responses and
// Anthropic streams frame theirs.
std::string sse_event(std::string_view name, const nlohmann::ordered_json& payload);
std::string sse_comment(std::string_view text);

}  // namespace pagellm
