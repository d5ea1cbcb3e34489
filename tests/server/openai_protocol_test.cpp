// The server's building blocks without HTTP: request parsing and
// preparation, response and chunk shapes, metrics, access log lines, the
// connection thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "server/access_log.h"
#include "server/chat_prompt.h"
#include "server/http_threads.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/sse.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

using json = nlohmann::json;

ApiError parse_error(const std::string& body, Endpoint ep) {
  try {
    parse_completion_request(body, ep);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

// The server's errors are pagellm errors: code that catches Error (the CLI,
// the engine's failure paths) catches them too, with their message.
TEST(OpenAiRequest, ApiErrorIsAPagellmError) {
  try {
    throw ApiError(400, "'max_tokens' must be positive", "invalid_request_error", "max_tokens");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "'max_tokens' must be positive");
    const auto* api = dynamic_cast<const ApiError*>(&e);
    ASSERT_NE(api, nullptr);
    EXPECT_EQ(api->status, 400);
    EXPECT_EQ(api->param, "max_tokens");
  }
}

TEST(OpenAiRequest, OpenAiDefaults) {
  const auto a = parse_completion_request(R"({"prompt": "Hi"})", Endpoint::kCompletion);
  EXPECT_EQ(a.sampling.temperature, 1.0f);
  EXPECT_EQ(a.sampling.top_p, 1.0f);
  EXPECT_EQ(a.sampling.top_k, 0);
  EXPECT_EQ(a.sampling.min_p, 0.0f);
  EXPECT_EQ(a.sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(a.n, 1);
  EXPECT_FALSE(a.stream);
  EXPECT_FALSE(a.max_tokens.has_value());
  EXPECT_EQ(a.logprobs, -1);
  ASSERT_EQ(a.prompts.size(), 1u);
  EXPECT_EQ(a.prompts[0].text, "Hi");
  // No seed: a fresh one each time.
  const auto b = parse_completion_request(R"({"prompt": "Hi"})", Endpoint::kCompletion);
  EXPECT_NE(a.sampling.seed, b.sampling.seed);
  const auto c = parse_completion_request(R"({"prompt": "Hi", "seed": -1})", Endpoint::kCompletion);
  EXPECT_EQ(c.sampling.seed, ~0ull);
}

TEST(OpenAiRequest, ChatFieldsAndNulls) {
  const auto r = parse_completion_request(
      R"({"model": "m", "messages": [{"role": "developer", "content": "S"},
          {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
          "max_completion_tokens": 7, "logprobs": true, "top_logprobs": 3, "stop": "x",
          "temperature": null, "stream": true, "stream_options": {"include_usage": true}})",
      Endpoint::kChat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.sampling.temperature, 1.0f);  // null = absent
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(parse_completion_request(R"({"messages": [{"role": "user", "content": "x"}],
                                         "logprobs": true})",
                                     Endpoint::kChat)
                .logprobs,
            0);
}

TEST(OpenAiRequest, ErrorsNameTheParameter) {
  EXPECT_EQ(parse_error("{", Endpoint::kChat).code, "invalid_json");
  // A number JSON cannot hold is a client error too, not a 500 (found by fuzzing).
  EXPECT_EQ(parse_error(R"({"prompt": "x", "max_tokens": 1e3081})", Endpoint::kCompletion).code,
            "invalid_json");
  EXPECT_EQ(parse_error(R"({"prompt": "x", "max_tokens": 1e3081})", Endpoint::kCompletion).status,
            400);
  EXPECT_EQ(parse_error("[]", Endpoint::kChat).status, 400);
  EXPECT_EQ(parse_error(R"({"messages": []})", Endpoint::kChat).param, "messages");
  EXPECT_EQ(parse_error(R"({"messages": [{"role": "x", "content": ""}]})", Endpoint::kChat).param,
            "messages[0].role");
  EXPECT_EQ(parse_error(R"({"prompt": "a", "temperature": 3})", Endpoint::kCompletion).param,
            "temperature");
  EXPECT_EQ(parse_error(R"({"prompt": "a", "n": "2"})", Endpoint::kCompletion).param, "n");
  EXPECT_EQ(parse_error(R"({"prompt": [1, "a"]})", Endpoint::kCompletion).param, "prompt");
  EXPECT_EQ(parse_error(R"({"prompt": "a", "echo": true})", Endpoint::kCompletion).code,
            "unsupported_parameter");
}

struct Stories {
  Stories() {
    file = GgufFile::open(test::data_path("stories260K.gguf"));
    tok = Tokenizer::from_gguf(*file);
    chat = ChatPrompt::for_model(*file, tok->vocab());
  }
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<ChatPrompt> chat;
};

TEST(OpenAiRequest, PrepareChecksTheContext) {
  Stories s;
  const ModelLimits limits{512, 100};
  auto req = parse_completion_request(R"({"prompt": [[1, 2, 3], [1, 5]]})", Endpoint::kCompletion);
  PreparedCompletion p = prepare_completion(req, *s.tok, *s.chat, limits);
  ASSERT_EQ(p.requests.size(), 2u);
  EXPECT_EQ(p.requests[0].prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p.requests[0].max_tokens, 16);  // the completions default
  EXPECT_EQ(p.prompt_tokens, (std::vector<int64_t>{3, 2}));

  auto chat = parse_completion_request(R"({"messages": [{"role": "user", "content": "Hi"}]})",
                                       Endpoint::kChat);
  p = prepare_completion(chat, *s.tok, *s.chat, limits);
  EXPECT_EQ(p.requests[0].max_tokens, 100 - p.prompt_tokens[0]);  // the rest of the context
  EXPECT_EQ(p.requests[0].prompt[0], s.tok->bos_id());

  req.max_tokens = 98;
  try {
    prepare_completion(req, *s.tok, *s.chat, limits);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_NE(std::string(e.what()).find("100"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("101"), std::string::npos);
  }
  auto oov = parse_completion_request(R"({"prompt": [1, 512]})", Endpoint::kCompletion);
  try {
    prepare_completion(oov, *s.tok, *s.chat, limits);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "invalid_token_id");
  }
}

TEST(OpenAiResponse, ChatShapes) {
  ResponseShape shape(Endpoint::kChat, "chatcmpl-1", 123, "m", /*logprobs=*/true,
                      /*include_usage=*/true);
  LogprobItem item{"a", -std::numeric_limits<float>::infinity(), {{"a", -0.5f}}, 0};
  const json full = json::parse(dump_json(shape.full({{"hi", FinishReason::kStop, {item}}}, Usage{3, 1, 0})));
  EXPECT_EQ(full["object"], "chat.completion");
  EXPECT_EQ(full["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(full["choices"][0]["logprobs"]["content"][0]["logprob"], -9999.0);
  EXPECT_EQ(full["choices"][0]["logprobs"]["content"][0]["bytes"], json::array({97}));
  EXPECT_EQ(full["usage"]["total_tokens"], 4);
  // Field order as OpenAI writes it.
  const std::string text = dump_json(shape.role_chunk(0));
  EXPECT_EQ(text.find("{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":123,"
                      "\"model\":\"m\",\"usage\":null,\"choices\""),
            0u)
      << text;
  const json end = json::parse(dump_json(shape.delta_chunk(0, "", {}, FinishReason::kLength)));
  EXPECT_EQ(end["choices"][0]["delta"], json::object());
  EXPECT_EQ(end["choices"][0]["finish_reason"], "length");
  const json usage = json::parse(dump_json(shape.usage_chunk(Usage{3, 1, 2})));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

TEST(OpenAiResponse, CompletionLogprobsAndErrors) {
  ResponseShape shape(Endpoint::kCompletion, "cmpl-1", 1, "m", true, false);
  const json chunk = json::parse(
      dump_json(shape.delta_chunk(0, "ab", {{"a", -1.0f, {{"a", -1.0f}, {"b", -2.0f}}, 0}}, FinishReason::kNone)));
  EXPECT_FALSE(chunk.contains("usage"));
  EXPECT_EQ(chunk["choices"][0]["text"], "ab");
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["top_logprobs"][0]["b"], -2.0);
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  const json err = json::parse(dump_json(error_json(ApiError(400, "bad", "t", "p", "c"))));
  EXPECT_EQ(err, json::parse(R"({"error": {"message": "bad", "type": "t", "param": "p",
                                           "code": "c"}})"));
  const json err2 = json::parse(dump_json(error_json(ApiError(503, "busy", "server_error"))));
  EXPECT_TRUE(err2["error"]["param"].is_null() && err2["error"]["code"].is_null());
  // Half a UTF-8 character does not throw.
  EXPECT_EQ(dump_json(nlohmann::ordered_json("\xe2\x82")), "\"\xef\xbf\xbd\"");
  EXPECT_EQ(sse_data(nlohmann::ordered_json{{"a", "x\ny"}}), "data: {\"a\":\"x\\ny\"}\n\n");
  EXPECT_EQ(sse_comment("a\nb"), ": a b\n\n");
  EXPECT_EQ(new_completion_id(Endpoint::kChat).size(), std::string("chatcmpl-").size() + 24);
}

TEST(ServerMetrics, HistogramsAreCumulativeAndEngineStatsShow) {
  ServerMetrics m;
  m.ttft.observe(0.003);
  m.ttft.observe(0.003);
  m.ttft.observe(100.0);
  m.count_http("/health", 200);
  m.count_finish("stop");
  MetricsSnapshot snap;
  snap.ready = true;
  snap.engine.blocks.total = 10;
  snap.engine.blocks.used = 4;
  snap.engine.admission_paused = true;
  const std::string text = m.render(snap);
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  };
  has("pagellm_time_to_first_token_seconds_bucket{le=\"0.001\"} 0");
  has("pagellm_time_to_first_token_seconds_bucket{le=\"0.005\"} 2");
  has("pagellm_time_to_first_token_seconds_bucket{le=\"80\"} 2");
  has("pagellm_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3");
  has("pagellm_time_to_first_token_seconds_count 3");
  has("pagellm_kv_cache_usage_ratio 0.4");
  has("pagellm_kv_blocks_used 4");
  has("pagellm_admission_paused 1");
  has("pagellm_http_requests_total{route=\"/health\",status=\"200\"} 1");
  has("pagellm_request_finished_total{finish_reason=\"stop\"} 1");
}

TEST(AccessLog, OneJsonLine) {
  AccessRecord r;
  r.id = "cmpl-1";
  r.method = "POST";
  r.path = "/v1/completions";
  r.status = 200;
  r.completion = true;
  r.prompt_tokens = 5;
  r.completion_tokens = 7;
  r.ttft_s = 0.0123;
  r.duration_s = 0.5;
  r.finish_reason = "length";
  const std::string line = AccessLog::format(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const json j = json::parse(line);
  EXPECT_EQ(j["event"], "access");
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["prompt_tokens"], 5);
  EXPECT_EQ(j["completion_tokens"], 7);
  EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 12.3);
  EXPECT_DOUBLE_EQ(j["duration_ms"].get<double>(), 500.0);
  r.completion = false;
  EXPECT_FALSE(json::parse(AccessLog::format(r)).contains("prompt_tokens"));
}

TEST(ElasticTaskQueue, GrowsSoBlockedJobsNeverWaitForEachOther) {
  ElasticTaskQueue q(64);
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  bool release = false;
  for (int i = 0; i < 20; ++i)
    q.enqueue([&] {
      std::unique_lock<std::mutex> lock(mu);
      ++started;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    });
  {
    std::unique_lock<std::mutex> lock(mu);
    // All 20 run at once, though each blocks until the others started.
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return started == 20; }));
    release = true;
  }
  cv.notify_all();
  EXPECT_LE(q.threads(), 20u);
  std::atomic<int> after{0};
  q.enqueue([&] { ++after; });
  q.shutdown();  // runs what is queued, joins
  EXPECT_EQ(after.load(), 1);
}

}  // namespace
}  // namespace pagellm
