// The Responses API's request parsing (POST /v1/responses) without a model:
// a body through parse_responses_request (with one stored response,
// "resp_known", for previous_response_id to find), prepare_completion on the
// shipped model's vocabulary and template, and the response object and
// stream events ResponsesOutput writes for a made-up reply.
#include <string>

#include "entries/fuzz_entries.h"
#include "entries/shipped_model.h"
#include "server/responses_api.h"
#include "util/error.h"

namespace pagellm::fuzz {

int responses_request(const uint8_t* data, size_t size) {
  const ShippedModel& v = shipped_model();
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto lookup = [](const std::string& id) -> std::optional<StoredResponse> {
    if (id != "resp_known") return std::nullopt;
    StoredResponse s;
    s.messages = nlohmann::ordered_json::array(
        {{{"role", "user"}, {"content", "Once upon a time"}},
         {{"role", "assistant"}, {"content", "there was a cat."}}});
    return s;
  };
  ResponsesRequest req;
  try {
    req = parse_responses_request(body, lookup);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) violated("a bad body must be refused with a 4xx");
    return 0;
  }
  if (req.chat.n != 1) violated("a Responses request is one choice");
  if (req.max_output_tokens && *req.max_output_tokens < 1) violated("max_output_tokens < 1");
  if (!req.conversation.is_array() || req.conversation.empty())
    violated("an accepted request has a conversation");
  try {
    check_prepared(prepare_completion(req.chat, *v.tok, *v.chat, v.limits), v.limits);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) violated("a bad request must be refused with a 4xx");
    return 0;
  }
  // What the output writes for it must be JSON the client can read.
  int saved = 0;
  ResponsesOutput out(req, "m", 0, [&](const std::string&, StoredResponse) { ++saved; });
  ChoiceResult c;
  c.text = "a \xff reply";  // invalid UTF-8 must not break the output
  c.finish_reason = FinishReason::kStop;
  std::string sse = out.stream_begin(1, Usage{3, 0, 0});
  sse += out.stream_text(0, c.text, {});
  sse += out.stream_finish(0, c);
  sse += out.stream_end(Usage{3, 2, 0});
  if (sse.find("response.completed") == std::string::npos) violated("no response.completed");
  if (saved != (req.store ? 1 : 0)) violated("stored exactly when asked to");
  return 0;
}

}  // namespace pagellm::fuzz
