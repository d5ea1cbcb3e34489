// The Responses and Anthropic Messages request parsers and their output
// shapes, CORS and the response store, without HTTP.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/anthropic_api.h"
#include "server/cors.h"
#include "server/response_store.h"
#include "server/responses_api.h"
#include "server/web_ui.h"
#include "util/error.h"

namespace pagellm {
namespace {

using ojson = nlohmann::ordered_json;

ResponseLookup no_history() {
  return [](const std::string&) { return std::optional<StoredResponse>(); };
}

ApiError responses_error(const std::string& body, ResponseLookup lookup = no_history()) {
  try {
    parse_responses_request(body, lookup);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

ApiError anthropic_error(const std::string& body, bool count_only = false) {
  try {
    parse_anthropic_request(body, count_only);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

// Splits SSE text into (event name, data JSON) pairs.
std::vector<std::pair<std::string, ojson>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, ojson>> out;
  std::string name;
  size_t at = 0;
  while (at < sse.size()) {
    size_t nl = sse.find('\n', at);
    if (nl == std::string::npos) nl = sse.size();
    const std::string line = sse.substr(at, nl - at);
    if (line.rfind("event: ", 0) == 0) name = line.substr(7);
    if (line.rfind("data: ", 0) == 0) {
      out.emplace_back(name, ojson::parse(line.substr(6)));
      name.clear();
    }
    at = nl + 1;
  }
  return out;
}

TEST(ResponsesRequest, StringInputAndInstructionsBecomeChatMessages) {
  auto r = parse_responses_request(
      R"({"model":"m","input":"Hi","instructions":"Be brief.","max_output_tokens":7,)"
      R"("temperature":0.5,"top_p":0.9,"seed":3})",
      no_history());
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[0].content, "Be brief.");
  EXPECT_EQ(r.chat.messages[1].role, "user");
  EXPECT_EQ(r.chat.messages[1].content, "Hi");
  EXPECT_EQ(r.max_output_tokens, 7);
  EXPECT_FALSE(r.chat.max_tokens.has_value());  // an upper bound applied after preparing
  EXPECT_FLOAT_EQ(r.chat.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.chat.sampling.top_p, 0.9f);
  EXPECT_EQ(r.chat.sampling.seed, 3u);
  // The conversation a continuation inherits leaves the instructions out.
  ASSERT_EQ(r.conversation.size(), 1u);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["max_output_tokens"], 7);
  EXPECT_TRUE(r.store);
}

TEST(ResponsesRequest, MessageItemsWithInputTextParts) {
  auto r = parse_responses_request(
      R"({"input":[{"role":"developer","content":"Sys"},)"
      R"({"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},)"
      R"({"role":"assistant","content":[{"type":"output_text","text":"c"}]},)"
      R"({"role":"user","content":"d"}],"stream":true,"store":false})",
      no_history());
  ASSERT_EQ(r.chat.messages.size(), 4u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[1].content, "ab");
  EXPECT_EQ(r.chat.messages[2].role, "assistant");
  EXPECT_EQ(r.chat.messages[2].content, "c");
  EXPECT_TRUE(r.chat.stream);
  EXPECT_FALSE(r.store);
}

TEST(ResponsesRequest, PreviousResponsePrependsItsConversation) {
  StoredResponse prev;
  prev.messages = ojson::array({{{"role", "user"}, {"content", "one"}},
                                {{"role", "assistant"}, {"content", "two"}}});
  auto lookup = [&](const std::string& id) {
    return id == "resp_1" ? std::optional<StoredResponse>(prev) : std::nullopt;
  };
  auto r = parse_responses_request(R"({"input":"three","previous_response_id":"resp_1"})", lookup);
  ASSERT_EQ(r.chat.messages.size(), 3u);
  EXPECT_EQ(r.chat.messages[0].content, "one");
  EXPECT_EQ(r.chat.messages[1].content, "two");
  EXPECT_EQ(r.chat.messages[2].content, "three");
  EXPECT_EQ(r.previous_response_id, "resp_1");

  ApiError e = responses_error(R"({"input":"x","previous_response_id":"resp_nope"})", lookup);
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.param, "previous_response_id");
  EXPECT_EQ(e.code, "previous_response_not_found");
  EXPECT_STREQ(e.what(), "Previous response with id 'resp_nope' not found.");
}

TEST(ResponsesRequest, FunctionToolsAndJsonSchemaGoThroughTheChatMachinery) {
  auto r = parse_responses_request(
      R"({"input":"w","tools":[{"type":"function","name":"get_weather","description":"d",)"
      R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],)"
      R"("tool_choice":{"type":"function","name":"get_weather"}})",
      no_history());
  ASSERT_EQ(r.chat.tools.size(), 1u);
  EXPECT_EQ(r.chat.tools[0].name, "get_weather");
  EXPECT_EQ(r.chat.tool_choice, CompletionRequest::ToolChoice::kNamed);
  EXPECT_EQ(r.echo["tool_choice"]["name"], "get_weather");

  auto s = parse_responses_request(
      R"({"input":"j","text":{"format":{"type":"json_schema","name":"p","schema":)"
      R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}})",
      no_history());
  EXPECT_NE(s.chat.grammar, nullptr);
  EXPECT_EQ(s.echo["text"]["format"]["type"], "json_schema");

  // Function call items and their outputs continue a tool conversation.
  auto t = parse_responses_request(
      R"({"input":[{"role":"user","content":"w"},)"
      R"({"type":"function_call","call_id":"call_1","name":"f","arguments":"{\"a\":1}"},)"
      R"({"type":"function_call_output","call_id":"call_1","output":"sunny"}]})",
      no_history());
  ASSERT_EQ(t.chat.messages.size(), 3u);
  EXPECT_EQ(t.chat.messages[1].role, "assistant");
  EXPECT_EQ(t.chat.messages[2].role, "tool");
  EXPECT_EQ(t.chat.messages[2].content, "sunny");
  ASSERT_TRUE(t.chat.messages_json.is_array());
  EXPECT_EQ(t.chat.messages_json[1]["tool_calls"][0]["function"]["name"], "f");
}

TEST(ResponsesRequest, BadInputNamesTheResponsesParameter) {
  struct Case {
    const char* body;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {R"({})", "input", "'input' is required"},
      {R"({"input":5})", "input", "'input' must be a string or an array of items, not an integer"},
      {R"({"input":[]})", "input", "'input' must not be empty"},
      {R"({"input":[{"role":"robot","content":"x"}]})", "input[0].role",
       "unknown role 'robot' in input[0] (expected user, assistant, system or developer)"},
      {R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]})",
       "input[0].content[0]",
       "content parts of type 'input_image' are not supported (only input_text and output_text)"},
      {R"({"input":[{"type":"web_search_call"}]})", "input[0]",
       "input items of type 'web_search_call' are not supported (message, function_call, "
       "function_call_output and reasoning are)"},
      {R"({"input":[{"type":"reasoning","content":[{"type":"reasoning_text"}]}]})",
       "input[0].content[0].text", "'input[0].content[0].text' is required"},
      {R"({"input":"x","max_output_tokens":0})", "max_output_tokens",
       "'max_output_tokens' must be in [1, 2147483647] (got 0)"},
      {R"({"input":"x","max_output_tokens":"9"})", "max_output_tokens",
       "'max_output_tokens' must be an integer, not a string"},
      {R"({"input":"x","temperature":3})", "temperature", "'temperature' must be in [0, 2] (got 3)"},
      {R"({"input":"x","tools":[{"type":"web_search"}]})", "tools[0]",
       "tools of type 'web_search' are not supported (only 'function')"},
      {R"({"input":"x","text":{"format":{"type":"yaml"}}})", "text.format",
       "'text.format' type must be text, json_object or json_schema, not 'yaml'"},
      {R"({"input":"x","store":"yes"})", "store", "'store' must be a boolean, not a string"},
      {R"({"input":"x","background":true})", "background", "'background' is not supported"},
  };
  for (const Case& c : cases) {
    ApiError e = responses_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(std::string(e.what()), c.message) << c.body;
  }
  EXPECT_EQ(responses_error("{bad").code, "invalid_json");
  EXPECT_EQ(std::string(responses_error("[1]").what()),
            "the request body must be a JSON object, not an array");
}

TEST(ResponsesOutput, FullResponseAndStoredConversation) {
  auto r = parse_responses_request(R"({"input":"Hi","metadata":{"k":"v"}})", no_history());
  std::string saved_id;
  StoredResponse saved;
  ResponsesOutput out(r, "model-x", 123, [&](const std::string& id, StoredResponse s) {
    saved_id = id;
    saved = std::move(s);
  });
  EXPECT_EQ(out.id().rfind("resp_", 0), 0u);
  ChoiceResult c;
  c.text = "Hello";
  c.finish_reason = FinishReason::kStop;
  Usage u{5, 2, 0};
  ojson body = out.full({c}, u);
  EXPECT_EQ(body["object"], "response");
  EXPECT_EQ(body["status"], "completed");
  EXPECT_EQ(body["model"], "model-x");
  EXPECT_EQ(body["created_at"], 123);
  EXPECT_EQ(body["output"][0]["type"], "message");
  EXPECT_EQ(body["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(body["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(body["usage"]["input_tokens"], 5);
  EXPECT_EQ(body["usage"]["output_tokens"], 2);
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
  EXPECT_EQ(body["metadata"]["k"], "v");
  EXPECT_EQ(saved_id, out.id());
  ASSERT_EQ(saved.messages.size(), 2u);
  EXPECT_EQ(saved.messages[1]["role"], "assistant");
  EXPECT_EQ(saved.messages[1]["content"], "Hello");

  c.finish_reason = FinishReason::kLength;
  ResponsesOutput out2(r, "m", 1, nullptr);
  ojson inc = out2.full({c}, u);
  EXPECT_EQ(inc["status"], "incomplete");
  EXPECT_EQ(inc["incomplete_details"]["reason"], "max_output_tokens");
}

TEST(ResponsesOutput, StreamEventsInOrderWithSequenceNumbers) {
  auto r = parse_responses_request(R"({"input":"Hi","stream":true,"store":false})", no_history());
  bool saved = false;
  ResponsesOutput out(r, "m", 1, [&](const std::string&, StoredResponse) { saved = true; });
  std::string sse = out.stream_begin(1, Usage{3, 0, 0});
  sse += out.stream_text(0, "He", {});
  sse += out.stream_text(0, "llo", {});
  ChoiceResult c;
  c.text = "Hello";
  c.finish_reason = FinishReason::kStop;
  sse += out.stream_finish(0, c);
  sse += out.stream_end(Usage{3, 2, 0});
  auto events = events_of(sse);
  const std::vector<std::string> expected = {
      "response.created",        "response.in_progress",       "response.output_item.added",
      "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.completed"};
  ASSERT_EQ(events.size(), expected.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].first, expected[i]);
    EXPECT_EQ(events[i].second["type"], expected[i]);
    EXPECT_EQ(events[i].second["sequence_number"], i);
  }
  EXPECT_EQ(events[4].second["delta"], "He");
  EXPECT_EQ(events[6].second["text"], "Hello");
  EXPECT_EQ(events.back().second["response"]["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(events.back().second["response"]["usage"]["output_tokens"], 2);
  EXPECT_FALSE(saved);  // store: false
}

TEST(ResponsesOutput, StreamedToolCallsAndFailure) {
  auto r = parse_responses_request(R"({"input":"Hi"})", no_history());
  ResponsesOutput out(r, "m", 1, nullptr);
  std::string sse = out.stream_begin(1, Usage{});
  sse += out.stream_tool_calls(0, {{"call_abc", "f", "{\"a\":1}"}});
  ChoiceResult c;
  c.finish_reason = FinishReason::kToolCalls;
  c.tool_calls = {{"call_abc", "f", "{\"a\":1}"}};
  sse += out.stream_finish(0, c);
  sse += out.stream_end(Usage{});
  auto events = events_of(sse);
  ASSERT_EQ(events.size(), 7u);
  EXPECT_EQ(events[2].first, "response.output_item.added");
  EXPECT_EQ(events[2].second["item"]["type"], "function_call");
  EXPECT_EQ(events[4].first, "response.function_call_arguments.done");
  EXPECT_EQ(events[4].second["arguments"], "{\"a\":1}");
  EXPECT_EQ(events[6].second["response"]["output"][0]["call_id"], "call_abc");

  ResponsesOutput failing(r, "m", 1, nullptr);
  auto f = events_of(failing.stream_begin(1, Usage{}) +
                     failing.stream_error(ApiError(503, "going away", "server_error")));
  EXPECT_EQ(f.back().first, "response.failed");
  EXPECT_EQ(f.back().second["response"]["status"], "failed");
  EXPECT_EQ(f.back().second["response"]["error"]["message"], "going away");
}

TEST(AnthropicRequest, SystemMessagesAndSampling) {
  auto r = parse_anthropic_request(
      R"({"model":"claude","max_tokens":20,"system":[{"type":"text","text":"S1"},{"type":"text","text":"S2"}],)"
      R"("messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},)"
      R"({"role":"user","content":[{"type":"text","text":"c"}]}],"temperature":0.3,"top_p":0.8,"top_k":5,)"
      R"("stop_sequences":["END"],"stream":true,"metadata":{"user_id":"u"}})",
      false);
  EXPECT_EQ(r.max_tokens, 20);
  ASSERT_EQ(r.chat.messages.size(), 4u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[0].content, "S1S2");
  EXPECT_EQ(r.chat.messages[2].content, "b");
  EXPECT_FLOAT_EQ(r.chat.sampling.temperature, 0.3f);
  EXPECT_FLOAT_EQ(r.chat.sampling.top_p, 0.8f);
  EXPECT_EQ(r.chat.sampling.top_k, 5);
  EXPECT_EQ(r.chat.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.chat.stream);
  // count_tokens needs no max_tokens.
  auto c = parse_anthropic_request(R"({"messages":[{"role":"user","content":"x"}]})", true);
  EXPECT_EQ(c.chat.messages.size(), 1u);
}

TEST(AnthropicRequest, BadInputIsRefusedWithTheFieldInTheMessage) {
  struct Case {
    const char* body;
    const char* message;
  };
  const Case cases[] = {
      {R"({"messages":[{"role":"user","content":"x"}]})", "max_tokens: Field required"},
      {R"({"max_tokens":0,"messages":[{"role":"user","content":"x"}]})",
       "max_tokens: must be in [1, 2147483647] (got 0)"},
      {R"({"max_tokens":5})", "messages: Field required"},
      {R"({"max_tokens":5,"messages":[]})", "messages: at least one message is required"},
      {R"({"max_tokens":5,"messages":[{"role":"system","content":"x"}]})",
       "messages.0.role: must be 'user' or 'assistant', not 'system'"},
      {R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
       "messages.0.content.0: content blocks of type 'image' are not supported in user messages "
       "(text and tool_result are)"},
      {R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}]})",
       "messages.0.content.0: tool_use_id 'x' matches no tool_use block of the previous assistant "
       "message"},
      {R"({"max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[)"
       R"({"type":"tool_use","id":"toolu_1","name":"f","input":[]}]},{"role":"user","content":"r"}]})",
       "messages.1.content.0.input: must be an object"},
      {R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]})",
       "messages.0.content.0: content blocks of type 'tool_use' are not supported in user messages "
       "(text and tool_result are)"},
      {R"({"max_tokens":5,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"x"}]})",
       "tools.0.input_schema: Field required (an object)"},
      {R"({"max_tokens":5,"tools":[{"type":"web_search_20250305","name":"w"}],"messages":[{"role":"user","content":"x"}]})",
       "tools.0: tools of type \"web_search_20250305\" are not supported (only client tools)"},
      {R"({"max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"maybe"},"messages":[{"role":"user","content":"x"}]})",
       "tool_choice.type: must be auto, any, tool or none, not 'maybe'"},
      {R"({"max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"},"messages":[{"role":"user","content":"x"}]})",
       "'tool_choice' names 'g', which is not in 'tools'"},
      {R"({"max_tokens":5,"thinking":{"type":"sometimes"},"messages":[{"role":"user","content":"x"}]})",
       "thinking: must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": \"disabled\"}"},
      {R"({"max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"x"}]})",
       "temperature: must be a number in [0, 1] (got 1.5)"},
      {R"({"max_tokens":5,"stop_sequences":"END","messages":[{"role":"user","content":"x"}]})",
       "stop_sequences: must be an array of strings, not a string"},
      {R"({"max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]})",
       "messages: a final assistant message (prefill) is not supported; end with a user message"},
      {R"({"max_tokens":5,"top_p":0,"messages":[{"role":"user","content":"x"}]})",
       "'top_p' must be in (0, 1] (got 0)"},
  };
  for (const Case& c : cases) {
    ApiError e = anthropic_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(std::string(e.what()), c.message) << c.body;
  }
  EXPECT_EQ(std::string(anthropic_error("nope").what()).rfind("the request body is not valid JSON", 0), 0u);
}

TEST(AnthropicOutput, ErrorShapesFollowTheStatus) {
  auto j = anthropic_error_json(ApiError(400, "bad thing"));
  EXPECT_EQ(j, ojson::parse(R"({"type":"error","error":{"type":"invalid_request_error","message":"bad thing"}})"));
  EXPECT_EQ(anthropic_error_json(ApiError(401, "k"))["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_json(ApiError(404, "k"))["error"]["type"], "not_found_error");
  EXPECT_EQ(anthropic_error_json(ApiError(413, "k"))["error"]["type"], "request_too_large");
  EXPECT_EQ(anthropic_error_json(ApiError(503, "k"))["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_error_json(ApiError(500, "k"))["error"]["type"], "api_error");
}

TEST(AnthropicOutput, MessageAndStream) {
  AnthropicOutput out("m");
  EXPECT_EQ(out.id().rfind("msg_", 0), 0u);
  ChoiceResult c;
  c.text = "Hi";
  c.finish_reason = FinishReason::kStop;
  c.stop_sequence = "END";
  ojson m = out.full({c}, Usage{4, 3, 0});
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"][0]["text"], "Hi");
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "END");
  EXPECT_EQ(m["usage"]["input_tokens"], 4);
  EXPECT_EQ(m["usage"]["output_tokens"], 3);

  c.stop_sequence.clear();
  EXPECT_EQ(anthropic_stop_reason(c), "end_turn");
  c.finish_reason = FinishReason::kLength;
  EXPECT_EQ(anthropic_stop_reason(c), "max_tokens");

  AnthropicOutput s("m");
  std::string sse = s.stream_begin(1, Usage{4, 0, 0});
  sse += s.stream_text(0, "H", {});
  sse += s.stream_text(0, "i", {});
  c.finish_reason = FinishReason::kStop;
  c.text = "Hi";
  sse += s.stream_finish(0, c);
  sse += s.stream_end(Usage{4, 2, 0});
  auto events = events_of(sse);
  const std::vector<std::string> expected = {"message_start",       "ping", "content_block_start",
                                             "content_block_delta", "content_block_delta",
                                             "content_block_stop",  "message_delta",
                                             "message_stop"};
  ASSERT_EQ(events.size(), expected.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].first, expected[i]);
    EXPECT_EQ(events[i].second["type"], expected[i]);
  }
  EXPECT_EQ(events[0].second["message"]["usage"]["input_tokens"], 4);
  EXPECT_EQ(events[3].second["delta"]["type"], "text_delta");
  EXPECT_EQ(events[3].second["delta"]["text"], "H");
  EXPECT_EQ(events[6].second["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(events[6].second["usage"]["output_tokens"], 2);
  auto err = events_of(s.stream_error(ApiError(503, "shutting down")));
  EXPECT_EQ(err[0].first, "error");
  EXPECT_EQ(err[0].second["error"]["type"], "overloaded_error");
}

TEST(Cors, OffByDefaultAndOnlyForListedOrigins) {
  CorsPolicy off;
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.response_headers("http://a.example").empty());

  CorsPolicy one({"http://a.example:3000"});
  EXPECT_TRUE(one.allows("http://a.example:3000"));
  EXPECT_TRUE(one.allows("HTTP://A.example:3000"));
  EXPECT_FALSE(one.allows("http://b.example"));
  EXPECT_FALSE(one.allows(""));
  auto h = one.response_headers("http://a.example:3000");
  ASSERT_GE(h.size(), 2u);
  EXPECT_EQ(h[0], std::make_pair(std::string("Access-Control-Allow-Origin"),
                                 std::string("http://a.example:3000")));
  EXPECT_EQ(h[1], std::make_pair(std::string("Vary"), std::string("Origin")));
  auto p = one.preflight_headers("http://a.example:3000", "content-type, x-stainless-os, bad header");
  std::string allow_headers, max_age;
  for (const auto& [k, v] : p) {
    if (k == "Access-Control-Allow-Headers") allow_headers = v;
    if (k == "Access-Control-Max-Age") max_age = v;
  }
  EXPECT_EQ(allow_headers,
            "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta, "
            "x-stainless-os");
  EXPECT_EQ(max_age, "86400");
  EXPECT_TRUE(one.preflight_headers("http://b.example", "").empty());

  CorsPolicy any({"*"});
  EXPECT_EQ(any.response_headers("http://x.example")[0].second, "*");

  EXPECT_THROW(CorsPolicy({"http://a.example/"}), ConfigError);
  EXPECT_THROW(CorsPolicy({"a.example"}), ConfigError);
  EXPECT_THROW(CorsPolicy({""}), ConfigError);
}

TEST(ResponseStore, KeepsTheMostRecentlyUsed) {
  ResponseStore store(2);
  store.put("a", {ojson{{"id", "a"}}, ojson::array()});
  store.put("b", {ojson{{"id", "b"}}, ojson::array()});
  ASSERT_TRUE(store.get("a"));  // a is now the most recent
  store.put("c", {ojson{{"id", "c"}}, ojson::array()});
  EXPECT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.get("a"));
  EXPECT_FALSE(store.get("b"));
  EXPECT_EQ(store.get("c")->response["id"], "c");
  EXPECT_TRUE(store.remove("c"));
  EXPECT_FALSE(store.remove("c"));
  EXPECT_EQ(store.size(), 1u);
}

TEST(WebUi, PageIsEmbedded) {
  const WebAsset* page = find_web_asset("index.html");
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<html"), std::string_view::npos);
  EXPECT_EQ(find_web_asset("nope.js"), nullptr);
  EXPECT_NE(web_ui_csp().find("script-src 'self'"), std::string_view::npos);
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

TEST(AnthropicRequest, ToolsToolUseAndToolResultsBecomeTheChatConversation) {
  auto r = parse_anthropic_request(
      R"({"max_tokens":50,"tools":[{"name":"add","description":"Adds","input_schema":)"
      R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}],)"
      R"("tool_choice":{"type":"any","disable_parallel_tool_use":true},)"
      R"("messages":[{"role":"user","content":"1+1?"},)"
      R"({"role":"assistant","content":[{"type":"thinking","thinking":"add it","signature":"s"},)"
      R"({"type":"text","text":"Let me add."},{"type":"tool_use","id":"toolu_9","name":"add","input":{"a":1}}]},)"
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":[{"type":"text","text":"2"}]},)"
      R"({"type":"text","text":"and now?"}]}]})",
      false);
  const auto& c = r.chat;
  ASSERT_EQ(c.tools.size(), 1u);
  EXPECT_EQ(c.tools[0].name, "add");
  EXPECT_EQ(c.tools[0].parameters["required"][0], "a");
  EXPECT_EQ(c.tool_choice, CompletionRequest::ToolChoice::kRequired);
  EXPECT_FALSE(c.parallel_tool_calls);
  const auto& m = c.messages_json;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1]["role"], "assistant");
  EXPECT_EQ(m[1]["content"], "Let me add.");
  EXPECT_EQ(m[1]["reasoning_content"], "add it");
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "toolu_9");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], ojson({{"a", 1}}));
  EXPECT_EQ(m[2]["role"], "tool");
  EXPECT_EQ(m[2]["tool_call_id"], "toolu_9");
  EXPECT_EQ(m[2]["content"], "2");
  EXPECT_EQ(m[3]["role"], "user");
  EXPECT_EQ(m[3]["content"], "and now?");

  auto named = parse_anthropic_request(
      R"({"max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object"}}],)"
      R"("tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"x"}]})",
      false);
  EXPECT_EQ(named.chat.tool_choice, CompletionRequest::ToolChoice::kNamed);
  EXPECT_EQ(named.chat.tool_name, "f");
  auto none = parse_anthropic_request(
      R"({"max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object"}}],)"
      R"("tool_choice":{"type":"none"},"messages":[{"role":"user","content":"x"}]})",
      false);
  EXPECT_EQ(none.chat.tool_choice, CompletionRequest::ToolChoice::kNone);
}

TEST(AnthropicOutput, ThinkingTextAndToolUseBlocksInOrder) {
  ChoiceResult c;
  c.reasoning = "think";
  c.text = "calling";
  c.finish_reason = FinishReason::kToolCalls;
  c.tool_calls = {{"call_abc", "add", R"({"a":1})"}, {"call_def", "add", R"({"a":2})"}};
  AnthropicOutput out("m");
  ojson m = out.full({c}, Usage{1, 2, 0});
  ASSERT_EQ(m["content"].size(), 4u);
  EXPECT_EQ(m["content"][0], ojson({{"type", "thinking"}, {"thinking", "think"}, {"signature", ""}}));
  EXPECT_EQ(m["content"][1]["text"], "calling");
  EXPECT_EQ(m["content"][2]["id"], "toolu_abc");
  EXPECT_EQ(m["content"][2]["input"], ojson({{"a", 1}}));
  EXPECT_EQ(m["content"][3]["id"], "toolu_def");
  EXPECT_EQ(m["stop_reason"], "tool_use");

  AnthropicOutput s("m");
  std::string sse = s.stream_begin(1, Usage{1, 0, 0});
  sse += s.stream_reasoning(0, "thi");
  sse += s.stream_reasoning(0, "nk");
  sse += s.stream_text(0, "calling", {});
  sse += s.stream_tool_calls(0, c.tool_calls);
  sse += s.stream_finish(0, c);
  sse += s.stream_end(Usage{1, 2, 0});
  // Each block: start, deltas, stop; indices 0, 1, 2, 3 in order.
  std::vector<std::pair<std::string, int>> blocks;
  std::string partial;
  for (const auto& [name, e] : events_of(sse)) {
    if (name == "content_block_start") blocks.emplace_back(e["content_block"]["type"], e["index"]);
    if (name == "content_block_delta") {
      EXPECT_EQ(e["index"], blocks.back().second);
      if (e["delta"]["type"] == "input_json_delta") partial += e["delta"]["partial_json"].get<std::string>();
    }
    if (name == "content_block_stop") EXPECT_EQ(e["index"], blocks.back().second);
    if (name == "message_delta") EXPECT_EQ(e["delta"]["stop_reason"], "tool_use");
  }
  const std::vector<std::pair<std::string, int>> want = {
      {"thinking", 0}, {"text", 1}, {"tool_use", 2}, {"tool_use", 3}};
  EXPECT_EQ(blocks, want);
  EXPECT_EQ(partial, R"({"a":1}{"a":2})");
}

}  // namespace
}  // namespace pagellm
