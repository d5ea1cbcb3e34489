#include "server/session_output.h"

#include "server/sse.h"

namespace pagellm {

std::string OpenAiOutput::stream_begin(size_t n_choices, const Usage&) {
  std::string sse;
  // Chat streams open every choice with its role.
  if (endpoint_ == Endpoint::kChat)
    for (size_t i = 0; i < n_choices; ++i)
      sse += sse_data(shape_.role_chunk(static_cast<int32_t>(i)));
  return sse;
}

std::string OpenAiOutput::stream_text(int32_t index, const std::string& text,
                                      const std::vector<LogprobItem>& logprobs) {
  return sse_data(shape_.delta_chunk(index, text, logprobs, FinishReason::kNone));
}

std::string OpenAiOutput::stream_tool_calls(int32_t index,
                                            const std::vector<ToolCallResult>& calls) {
  std::string sse;
  for (const auto& chunk : shape_.tool_call_chunks(index, calls)) sse += sse_data(chunk);
  return sse;
}

std::string OpenAiOutput::stream_reasoning(int32_t index, const std::string& text) {
  if (text.empty() || endpoint_ != Endpoint::kChat) return "";
  return sse_data(shape_.reasoning_chunk(index, text));
}

std::string OpenAiOutput::stream_finish(int32_t index, const ChoiceResult& choice) {
  return sse_data(shape_.delta_chunk(index, "", {}, choice.finish_reason));
}

std::string OpenAiOutput::stream_end(const Usage& usage) {
  std::string sse;
  if (include_usage_) sse += sse_data(shape_.usage_chunk(usage));
  return sse + sse_done();
}

std::string OpenAiOutput::stream_error(const ApiError& e) {
  return sse_data(error_json(e)) + sse_done();
}

nlohmann::ordered_json OpenAiOutput::full(const std::vector<ChoiceResult>& choices,
                                          const Usage& usage) {
  return shape_.full(choices, usage);
}

}  // namespace pagellm
