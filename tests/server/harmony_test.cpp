// The harmony reply reader (gpt-oss): thought, answer and calls of whole
// replies as written by hand from the format, and every cut of a reply into
// two pieces or random pieces gives the same.
#include "server/harmony.h"

#include <gtest/gtest.h>

#include <random>

namespace pagellm {
namespace {

struct Split {
  std::string reasoning, content;
  std::vector<ParsedToolCall> calls;
};

Split read_in_pieces(const std::string& reply, const std::vector<size_t>& cuts) {
  HarmonySplitter s;
  Split out;
  size_t at = 0;
  auto add = [&out](const ReplySplitter::Delta& d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
  };
  for (size_t c : cuts) {
    add(s.push(reply.substr(at, c - at)));
    at = c;
  }
  add(s.push(reply.substr(at)));
  add(s.finish());
  out.calls = s.tool_calls();
  return out;
}

struct Case {
  std::string reply;
  Split want;
};

TEST(HarmonySplitter, ThoughtAnswerAndCallsAtEveryCut) {
  const std::vector<Case> cases = {
      {"<|channel|>analysis<|message|>User asks 2+2. Easy.<|end|><|start|>assistant<|channel|>final"
       "<|message|>It is 4.<|return|>",
       {"User asks 2+2. Easy.", "It is 4.", {}}},
      {"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
       {"Need weather.", "", {{"get_weather", "{\"city\":\"Paris\"}"}}}},
      // The recipient in the role position, and two calls.
      {" to=functions.a<|channel|>commentary json<|message|>{}<|call|><|start|>assistant to=functions.b"
       "<|channel|>commentary json<|message|>{\"x\":1}<|call|>",
       {"", "", {{"a", "{}"}, {"b", "{\"x\":1}"}}}},
      // A commentary preamble is for the user; a body may hold '<' and tags that are not markers.
      {"<|channel|>commentary<|message|>Let me check a < b <i>now</i>.<|end|>",
       {"", "Let me check a < b <i>now</i>.", {}}},
      // No header at all: all answer.
      {"Plain words, no header.", {"", "Plain words, no header.", {}}},
      // Cut off: inside the thought, inside a call, inside a header.
      {"<|channel|>analysis<|message|>unfinished", {"unfinished", "", {}}},
      {"<|channel|>commentary to=functions.f json<|message|>{\"a\":", {"", "", {{"f", "{\"a\":"}}}},
      {"<|channel|>analysis<|message|>t<|end|><|start|>assistant<|chan", {"t", "", {}}},
      {"", {"", "", {}}},
  };
  std::mt19937 rng(3);
  for (const auto& c : cases) {
    std::vector<std::vector<size_t>> cut_sets = {{}};
    for (size_t k = 0; k <= c.reply.size(); ++k) cut_sets.push_back({k});
    for (int t = 0; t < 30; ++t) {
      std::vector<size_t> cuts;
      for (size_t k = 1; k < c.reply.size(); ++k)
        if (rng() % 4 == 0) cuts.push_back(k);
      cut_sets.push_back(cuts);
    }
    for (const auto& cuts : cut_sets) {
      const Split got = read_in_pieces(c.reply, cuts);
      EXPECT_EQ(got.reasoning, c.want.reasoning) << c.reply;
      EXPECT_EQ(got.content, c.want.content) << c.reply;
      ASSERT_EQ(got.calls.size(), c.want.calls.size()) << c.reply;
      for (size_t i = 0; i < got.calls.size(); ++i) {
        EXPECT_EQ(got.calls[i].name, c.want.calls[i].name) << c.reply;
        EXPECT_EQ(got.calls[i].arguments, c.want.calls[i].arguments) << c.reply;
      }
    }
  }
}

TEST(HarmonySplitter, KnownCallsKeepToolsWithObjectArguments) {
  const std::vector<ToolSpec> tools = {{"get_weather", "", {{"type", "object"}}}};
  const auto kept = known_calls({{"get_weather", "{ \"city\" : \"Paris\" }"},
                                 {"unknown", "{}"},
                                 {"get_weather", "[1]"},
                                 {"get_weather", "{broken"}},
                                tools);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].arguments, "{\"city\":\"Paris\"}");
}

TEST(HarmonySplitter, TemplatesThatWriteHarmony) {
  EXPECT_TRUE(template_writes_harmony("<|start|>assistant<|channel|>final<|message|>"));
  EXPECT_FALSE(template_writes_harmony("<|im_start|>assistant\n<think>"));
}

}  // namespace
}  // namespace pagellm
