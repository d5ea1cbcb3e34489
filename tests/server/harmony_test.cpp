// The harmony reply reader (gpt-oss): thought, answer and calls of whole
// replies as written by hand from the format, and every cut of a reply into
// two pieces or random pieces gives the same.
#include "server/harmony.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <tuple>

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

namespace pagellm {
namespace {

// Random texts over the formats' own pieces: every two-piece cut of a reply
// reads as the whole reply, for both splitters.
TEST(ReplySplitters, RandomRepliesReadTheSameAtEveryCut) {
  const std::vector<std::string> pieces = {
      "<think>", "</think>", "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|call|>",
      "<|return|>", " to=functions.f", "analysis", "final", "commentary", " json", "<", "|", ">",
      " ", "\n", "a", "{}", "</", "<|", "to="};
  std::mt19937 rng(11);
  auto read = [](ReplySplitter& s, const std::string& text, size_t cut) {
    ReplySplitter::Delta all = s.push(std::string_view(text).substr(0, cut));
    const auto rest = s.push(std::string_view(text).substr(cut));
    const auto last = s.finish();
    return std::make_tuple(all.reasoning + rest.reasoning + last.reasoning,
                           all.content + rest.content + last.content, s.tool_calls().size());
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    for (int k = static_cast<int>(rng() % 8); k >= 0; --k) text += pieces[rng() % pieces.size()];
    for (int kind = 0; kind < 3; ++kind) {
      auto make = [kind]() -> std::unique_ptr<ReplySplitter> {
        if (kind == 2) return std::make_unique<HarmonySplitter>();
        return std::make_unique<ReasoningSplitter>(ThinkSyntax{}, kind == 1);
      };
      auto whole_s = make();
      const auto whole = read(*whole_s, text, text.size());
      for (size_t cut = 0; cut <= text.size(); ++cut) {
        auto s = make();
        ASSERT_EQ(read(*s, text, cut), whole) << "kind " << kind << " cut " << cut << ": " << text;
      }
    }
  }
}

}  // namespace
}  // namespace pagellm
