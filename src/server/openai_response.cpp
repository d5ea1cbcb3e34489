#include "server/openai_response.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

namespace pagellm {

using json = nlohmann::ordered_json;

namespace {

// JSON has no infinity: an impossible token reads as -9999 (OpenAI's floor).
double finite_logprob(float lp) {
  return std::isfinite(lp) ? lp : -9999.0;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// OpenAI's words ("stop", "length", "tool_calls") are the engine's names;
// null while the choice goes on.
json finish_reason_json(FinishReason r) {
  return r == FinishReason::kNone ? json(nullptr) : json(finish_reason_name(r));
}

}  // namespace

ResponseShape::ResponseShape(Endpoint endpoint, std::string id, int64_t created, std::string model,
                             bool logprobs, bool include_usage)
    : endpoint_(endpoint),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      logprobs_(logprobs),
      include_usage_(include_usage) {}

json ResponseShape::logprobs_json(const std::vector<LogprobItem>& items) const {
  if (!logprobs_) return nullptr;
  if (endpoint_ == Endpoint::kChat) {
    json content = json::array();
    for (const auto& it : items) {
      json top = json::array();
      for (const auto& [tok, lp] : it.top)
        top.push_back({{"token", tok}, {"logprob", finite_logprob(lp)}, {"bytes", bytes_of(tok)}});
      content.push_back({{"token", it.token},
                         {"logprob", finite_logprob(it.logprob)},
                         {"bytes", bytes_of(it.token)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const auto& it : items) {
    tokens.push_back(it.token);
    token_logprobs.push_back(finite_logprob(it.logprob));
    json alts = json::object();
    for (const auto& [tok, lp] : it.top)
      if (!alts.contains(tok)) alts[tok] = finite_logprob(lp);
    top.push_back(alts);
    offsets.push_back(it.text_offset);
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json ResponseShape::full(const std::vector<ChoiceResult>& choices, const Usage& usage) const {
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    if (endpoint_ == Endpoint::kChat) {
      json message = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) message["content"] = nullptr;
        message["tool_calls"] = tool_calls_json(c.tool_calls);
      }
      cs.push_back({{"index", i},
                    {"message", message},
                    {"logprobs", logprobs_json(c.logprobs)},
                    {"finish_reason", finish_reason_json(c.finish_reason)}});
    } else {
      cs.push_back({{"index", i},
                    {"text", c.text},
                    {"logprobs", logprobs_json(c.logprobs)},
                    {"finish_reason", finish_reason_json(c.finish_reason)}});
    }
  }
  return {{"id", id_},
          {"object", endpoint_ == Endpoint::kChat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", cs},
          {"usage", usage_json(usage)}};
}

json ResponseShape::chunk_base() const {
  json j = {{"id", id_},
            {"object", endpoint_ == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_}};
  if (include_usage_) j["usage"] = nullptr;
  return j;
}

json ResponseShape::role_chunk(int32_t index) const {
  json j = chunk_base();
  j["choices"] = json::array({{{"index", index},
                               {"delta", {{"role", "assistant"}, {"content", ""}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}});
  return j;
}

json ResponseShape::delta_chunk(int32_t index, const std::string& text,
                                const std::vector<LogprobItem>& logprobs,
                                FinishReason finish_reason) const {
  json j = chunk_base();
  json choice = {{"index", index}};
  if (endpoint_ == Endpoint::kChat) {
    choice["delta"] =
        text.empty() && finish_reason != FinishReason::kNone ? json::object() : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs.empty() ? json(nullptr) : logprobs_json(logprobs);
  choice["finish_reason"] = finish_reason_json(finish_reason);
  j["choices"] = json::array({choice});
  return j;
}

json ResponseShape::reasoning_chunk(int32_t index, const std::string& text) const {
  json j = chunk_base();
  j["choices"] = json::array({{{"index", index},
                               {"delta", {{"reasoning_content", text}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}});
  return j;
}

std::vector<json> ResponseShape::tool_call_chunks(int32_t index,
                                                  const std::vector<ToolCallResult>& calls) const {
  std::vector<json> out;
  auto chunk = [&](json delta) {
    json j = chunk_base();
    j["choices"] = json::array(
        {{{"index", index}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    out.push_back(std::move(j));
  };
  for (size_t k = 0; k < calls.size(); ++k) {
    const ToolCallResult& c = calls[k];
    chunk({{"tool_calls", json::array({{{"index", k},
                                         {"id", c.id},
                                         {"type", "function"},
                                         {"function", {{"name", c.name}, {"arguments", ""}}}}})}});
    // The arguments in pieces of about 24 bytes, cut between characters.
    for (size_t b = 0; b < c.arguments.size();) {
      size_t e = std::min(c.arguments.size(), b + 24);
      while (e < c.arguments.size() && (static_cast<unsigned char>(c.arguments[e]) & 0xC0) == 0x80)
        ++e;
      chunk({{"tool_calls",
              json::array({{{"index", k}, {"function", {{"arguments", c.arguments.substr(b, e - b)}}}}})}});
      b = e;
    }
  }
  return out;
}

json ResponseShape::usage_chunk(const Usage& usage) const {
  json j = chunk_base();
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json tool_calls_json(const std::vector<ToolCallResult>& calls) {
  json out = json::array();
  for (const auto& tc : calls)
    out.push_back({{"id", tc.id},
                   {"type", "function"},
                   {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}});
  return out;
}

json error_json(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string new_completion_id(Endpoint endpoint) {
  return new_random_id(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
}

std::string new_random_id(std::string_view prefix) {
  // Seeded with 256 bits: one 32-bit seed per thread would give at most 2^32
  // streams, and two threads on equal seeds would repeat each other's ids.
  thread_local std::mt19937_64 gen = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }();
  return fmt::format("{}{:016x}{:08x}", prefix, gen(), static_cast<uint32_t>(gen()));
}

}  // namespace pagellm
