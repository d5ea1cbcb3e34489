// Tool-call formats: which template writes which, the parser on replies in
// each format as models write them (calls found, text outside kept, calls to
// unknown tools and broken JSON left as text), and the forcing grammar
// accepting exactly well-formed calls.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gguf/gguf_reader.h"
#include "grammar/grammar_matcher.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

std::string template_source(const std::string& name) {
  return test::read_file(test::data_path("chat-templates/" + name));
}

std::vector<ToolSpec> tools() {
  return {{"get_weather", "",
           nlohmann::ordered_json::parse(
               R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"],"additionalProperties":false})")},
          {"get_time", "", nlohmann::ordered_json::parse(R"({"type":"object","properties":{}})")}};
}

TEST(ToolCalls, FormatsOfTheShippedTemplates) {
  EXPECT_EQ(tool_format_of(template_source("Qwen-Qwen2.5-7B-Instruct.jinja")), ToolFormat::kHermes);
  EXPECT_EQ(tool_format_of(template_source("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja")),
            ToolFormat::kHermes);
  EXPECT_EQ(tool_format_of(template_source("meta-llama-Llama-3.1-8B-Instruct.jinja")),
            ToolFormat::kLlama3);
  EXPECT_EQ(tool_format_of(template_source("mistralai-Mistral-Nemo-Instruct-2407.jinja")),
            ToolFormat::kMistral);
  EXPECT_TRUE(template_renders_tools(template_source("Qwen-Qwen2.5-7B-Instruct.jinja")));
  EXPECT_FALSE(template_renders_tools("{% for m in messages %}{{ m.content }}{% endfor %}"));
}

TEST(ToolCalls, ParsesRepliesInEachFormat) {
  std::string content;
  // Qwen 2.5 / Hermes: text around, two calls.
  auto calls = parse_tool_calls(
      ToolFormat::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {}}\n</tool_call>",
      tools(), content);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(calls[0].arguments)["city"], "Paris");
  EXPECT_EQ(calls[1].name, "get_time");
  EXPECT_EQ(content, "Let me check.");
  // Llama 3.1: the reply is the call, with "parameters".
  calls = parse_tool_calls(ToolFormat::kLlama3,
                           "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
                           tools(), content);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(calls[0].arguments)["city"], "Oslo");
  EXPECT_EQ(content, "");
  // Mistral: a marker and a list; arguments as a JSON string too.
  calls = parse_tool_calls(
      ToolFormat::kMistral,
      "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", "
      "\"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}]",
      tools(), content);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(calls[1].arguments)["city"], "Rome");
  // Not calls: plain answers, unknown tools, broken JSON stay text.
  for (auto [format, text] : std::vector<std::pair<ToolFormat, std::string>>{
           {ToolFormat::kHermes, "It is sunny in Paris."},
           {ToolFormat::kHermes, "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>"},
           {ToolFormat::kHermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\n</tool_call>"},
           {ToolFormat::kLlama3, "{\"answer\": 42}"},
           {ToolFormat::kLlama3, "{\"name\": \"get_time\", \"parameters\": {}} and more"},
           {ToolFormat::kMistral, "[TOOL_CALLS][{\"name\": \"get_time\"}, {\"name\": \"nope\"}]"}}) {
    calls = parse_tool_calls(format, text, tools(), content);
    EXPECT_TRUE(calls.empty()) << text;
    EXPECT_EQ(content, format == ToolFormat::kHermes ? text : text) << text;
  }
}

TEST(ToolCalls, ForcingGrammarTakesExactlyWellFormedCalls) {
  const auto hermes = Grammar::parse(tool_call_gbnf(ToolFormat::kHermes, tools(), true));
  EXPECT_TRUE(grammar_accepts(hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                      "{\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"));
  EXPECT_TRUE(grammar_accepts(hermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
                                      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
                                      "\"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                       "{\"city\": \"Paris\", \"days\": 9}}\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(hermes, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(hermes, "Sure!"));
  const auto single = Grammar::parse(tool_call_gbnf(ToolFormat::kHermes, tools(), false));
  EXPECT_FALSE(grammar_accepts(single, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
                                       "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
                                       "\"arguments\": {}}\n</tool_call>"));
  const auto llama = Grammar::parse(tool_call_gbnf(ToolFormat::kLlama3, tools(), true));
  EXPECT_TRUE(grammar_accepts(llama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"x\"}}"));
  const auto mistral = Grammar::parse(tool_call_gbnf(ToolFormat::kMistral, tools(), true));
  EXPECT_TRUE(grammar_accepts(mistral, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]"));
  EXPECT_TRUE(grammar_accepts(mistral, "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": "
                                       "\"get_time\", \"arguments\": {}}]"));
  // What the grammar takes, the parser finds.
  std::string content;
  EXPECT_EQ(parse_tool_calls(ToolFormat::kMistral,
                             "[{\"name\": \"get_time\", \"arguments\": {}}]", tools(), content)
                .size(),
            1u);
}

// The grammar a request's tool_choice gets (prepare_completion, on the
// shipped model's template: the generic <tool_call> form): a named function
// is exactly one call of it, even with parallel_tool_calls left at true;
// `required` takes several unless parallel_tool_calls is false.
TEST(ToolCalls, NamedChoiceForcesExactlyOneCall) {
  auto file = GgufFile::open(test::data_path("stories260K.gguf"));
  auto tok = Tokenizer::from_gguf(*file);
  auto chat = ChatPrompt::for_model(*file, tok->vocab());
  const std::string tools_json =
      R"([{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}},)"
      R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{}}}}])";
  auto grammar_of = [&](const std::string& extra) {
    const auto req = parse_completion_request(
        R"({"messages":[{"role":"user","content":"Hi"}],"tools":)" + tools_json + extra + "}",
        Endpoint::kChat);
    const auto prepared = prepare_completion(req, *tok, *chat, ModelLimits{512, 4096});
    EXPECT_TRUE(prepared.parse_tools);
    return prepared.requests.at(0).grammar;
  };
  const std::string one_time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const std::string one_weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
  const std::string two_time = one_time + "\n" + one_time;
  for (const char* parallel : {"", R"(,"parallel_tool_calls":true)", R"(,"parallel_tool_calls":false)"}) {
    const auto named = grammar_of(
        std::string(R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})") + parallel);
    ASSERT_TRUE(named) << parallel;
    EXPECT_TRUE(grammar_accepts(named, one_time)) << parallel;
    EXPECT_FALSE(grammar_accepts(named, two_time)) << parallel;
    EXPECT_FALSE(grammar_accepts(named, one_weather)) << parallel;
    EXPECT_FALSE(grammar_accepts(named, one_time + "\n" + one_weather)) << parallel;
  }
  const auto required = grammar_of(R"(,"tool_choice":"required")");
  EXPECT_TRUE(grammar_accepts(required, two_time));
  EXPECT_TRUE(grammar_accepts(required, one_weather));
  const auto single = grammar_of(R"(,"tool_choice":"required","parallel_tool_calls":false)");
  EXPECT_TRUE(grammar_accepts(single, one_weather));
  EXPECT_FALSE(grammar_accepts(single, two_time));
}

}  // namespace
}  // namespace pagellm
