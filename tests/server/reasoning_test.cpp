// Reasoning replies: the streaming splitter against a whole-text reference
// (every cut of the reply into pieces gives the reference's thought and
// answer), which templates reason and open the thought, and the grammar that
// lets a forced answer follow a thought.
#include "server/reasoning.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

std::string template_source(const std::string& name) {
  return test::read_file(test::data_path("chat-templates/" + name));
}

std::string trim_ws(const std::string& s) {
  const char* ws = " \n\r\t";
  const size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

std::string ltrim_ws(const std::string& s) {
  const size_t a = s.find_first_not_of(" \n\r\t");
  return a == std::string::npos ? "" : s.substr(a);
}

// The whole reply split at once, as the format describes it.
ReasoningSplitter::Delta reference_split(const std::string& reply, bool opened) {
  std::string rest = reply;
  if (!opened) {
    const std::string lead = ltrim_ws(reply);
    if (lead.rfind("<think>", 0) != 0) return {"", reply};
    rest = lead.substr(7);
  }
  const size_t close = rest.find("</think>");
  if (close == std::string::npos) return {trim_ws(rest), ""};
  return {trim_ws(rest.substr(0, close)), ltrim_ws(rest.substr(close + 8))};
}

ReasoningSplitter::Delta split_in_pieces(const std::string& reply, bool opened,
                                         const std::vector<size_t>& cuts) {
  ReasoningSplitter s(ThinkSyntax{}, opened);
  ReasoningSplitter::Delta all;
  size_t at = 0;
  for (size_t cut : cuts) {
    const auto d = s.push(reply.substr(at, cut - at));
    all.reasoning += d.reasoning;
    all.content += d.content;
    at = cut;
  }
  const auto d = s.push(reply.substr(at));
  all.reasoning += d.reasoning;
  all.content += d.content;
  const auto last = s.finish();
  all.reasoning += last.reasoning;
  all.content += last.content;
  EXPECT_EQ(all.reasoning, s.reasoning());
  EXPECT_EQ(all.content, s.content());
  return all;
}

TEST(ReasoningSplitter, EveryCutGivesTheWholeTextSplit) {
  const std::vector<std::string> replies = {
      "<think>\nLet me see.\n</think>\n\nThe answer is 4.",
      "  \n<think>a</think>b",
      "<think>\n\n</think>\n\nNo thought.",
      "<think>unfinished thought",
      "<thi",
      "Plain answer with <think> later</think>",
      "<thinking>not the tag</thinking>",
      "",
      "   ",
      "<think>one < two and a </thin that is not a close</think>  answer </think> kept",
      "I ponder.\n</think>\n\nHello",
  };
  std::mt19937 rng(7);
  for (const auto& reply : replies)
    for (bool opened : {false, true}) {
      const auto want = reference_split(reply, opened);
      // Every single cut, then random sets of cuts.
      for (size_t c = 0; c <= reply.size(); ++c) {
        const auto got = split_in_pieces(reply, opened, {c});
        EXPECT_EQ(got.reasoning, want.reasoning) << reply << " cut " << c << " opened " << opened;
        EXPECT_EQ(got.content, want.content) << reply << " cut " << c << " opened " << opened;
      }
      for (int trial = 0; trial < 50 && !reply.empty(); ++trial) {
        std::vector<size_t> cuts;
        for (size_t c = 1; c < reply.size(); ++c)
          if (rng() % 3 == 0) cuts.push_back(c);
        const auto got = split_in_pieces(reply, opened, cuts);
        EXPECT_EQ(got.reasoning, want.reasoning) << reply;
        EXPECT_EQ(got.content, want.content) << reply;
      }
    }
}

TEST(ReasoningSplitter, LegacyKeepsTheRawTextInTheContent) {
  ReasoningSplitter s(ThinkSyntax{}, false, /*keep_in_content=*/true);
  std::string content;
  for (const char* piece : {"<thi", "nk>why", "</think>", "so"}) content += s.push(piece).content;
  content += s.finish().content;
  EXPECT_EQ(content, "<think>why</think>so");
  EXPECT_EQ(s.reasoning(), "why");
}

TEST(ReasoningFormat, NamesRoundTripAndUnknownIsRefused) {
  for (const char* n : {"none", "auto", "deepseek", "deepseek-legacy"})
    EXPECT_STREQ(reasoning_format_name(*reasoning_format_from(n)), n);
  EXPECT_FALSE(reasoning_format_from("DeepSeek"));
  EXPECT_FALSE(reasoning_format_from(""));
}

TEST(ThinkSyntax, ReasoningTemplatesAndWhetherTheyOpenTheThought) {
  EXPECT_TRUE(think_syntax_of(template_source("Qwen-Qwen3-0.6B.jinja")));
  EXPECT_TRUE(think_syntax_of(template_source("Qwen3.5-4B.jinja")));
  EXPECT_TRUE(think_syntax_of(template_source("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")));
  EXPECT_FALSE(think_syntax_of(template_source("Qwen-Qwen2.5-7B-Instruct.jinja")));
  EXPECT_FALSE(think_syntax_of(template_source("meta-llama-Llama-3.1-8B-Instruct.jinja")));
  const ThinkSyntax t;
  EXPECT_TRUE(prompt_opens_thought("<｜Assistant｜><think>\n", t));
  EXPECT_FALSE(prompt_opens_thought("<|im_start|>assistant\n<think>\n\n</think>\n\n", t));
  EXPECT_FALSE(prompt_opens_thought("<|im_start|>assistant\n", t));
}

bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.advance(text) && m.accepting();
}

TEST(ThoughtGrammar, AForcedAnswerMayFollowAThought) {
  const std::string answer = "root ::= \"{\" [0-9]+ \"}\"\n";
  const ThinkSyntax t;
  const auto optional = Grammar::parse(gbnf_after_thought(answer, t, false), kThoughtStartRule);
  EXPECT_TRUE(matches(optional, "{42}"));
  EXPECT_TRUE(matches(optional, "<think>\nweigh it: a < b\n</think>\n\n{42}"));
  EXPECT_TRUE(matches(optional, "\n<think></think>{1}"));
  EXPECT_FALSE(matches(optional, "<think>no close {42}"));
  EXPECT_FALSE(matches(optional, "<think>x</think>{x}"));
  EXPECT_FALSE(matches(optional, "words {42}"));

  const auto opened = Grammar::parse(gbnf_after_thought(answer, t, true), kThoughtStartRule);
  EXPECT_TRUE(matches(opened, "thinking\n</think>\n{7}"));
  EXPECT_TRUE(matches(opened, "</think>{7}"));
  EXPECT_FALSE(matches(opened, "{7}"));
  EXPECT_FALSE(matches(opened, "thinking {7}"));
}

}  // namespace
}  // namespace pagellm
