// The matcher's graph-structured stack: grammars ambiguous in how deep they
// nest keep a few tops, random recursive grammars agree with a naive
// recognizer on every short string, and a grammar too ambiguous to follow
// ends with an error.
#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <set>

#include "short_strings.h"
#include "util/error.h"

namespace pagellm {
namespace {

// Naive recognizer over the compiled rules: ends[r][i] = the positions j
// such that rule r derives text[i, j), computed to a fixpoint (so cycles of
// references that consume nothing are fine).
bool naive_accepts(const Grammar& g, const std::string& text) {
  const auto& rules = g.rules();
  const size_t n = text.size();
  std::vector<std::vector<std::set<size_t>>> ends(rules.size(),
                                                  std::vector<std::set<size_t>>(n + 1));
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r)
      for (size_t i = 0; i <= n; ++i)
        for (const auto& alt : rules[r]) {
          std::set<size_t> at = {i};
          for (const auto& el : alt) {
            std::set<size_t> next;
            for (size_t p : at) {
              if (el.kind == Grammar::Element::kBytes) {
                const auto b = p < n ? static_cast<uint8_t>(text[p]) : 0;
                if (p < n && b >= el.lo && b <= el.hi) next.insert(p + 1);
              } else {
                const auto& e = ends[static_cast<size_t>(el.rule)][p];
                next.insert(e.begin(), e.end());
              }
            }
            at.swap(next);
          }
          for (size_t j : at) changed |= ends[r][i].insert(j).second;
        }
  }
  return ends[static_cast<size_t>(g.root())][0].count(n) > 0;
}

const char* const kAmbiguousNesting = R"G(
root ::= expr
expr ::= term+ (root ("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")"
)G";

TEST(GrammarMatcher, AmbiguousNestingKeepsOneTopPerPosition) {
  const auto g = Grammar::parse(kAmbiguousNesting);
  for (const std::string unit : {"11+1", "(11-1)", "1"}) {
    SCOPED_TRACE(unit);
    GrammarMatcher m(g);
    size_t most = 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::string text;
    for (int i = 0; i < 100; ++i) text += unit;
    ASSERT_TRUE(m.advance(text));
    most = std::max(most, m.stacks().size());
    // Every stack path was a stack of its own before: 319,000 after 48 bytes.
    EXPECT_LE(most, 16u);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
    EXPECT_EQ(m.accepting(), naive_accepts(*g, text));
  }
  for (const char* s : {"11+1", "111+1", "11+1+1", "1(11+1)", "(1)1-1", "1+", "+1", "11+", "(1"})
    EXPECT_EQ(grammar_accepts(g, s), naive_accepts(*g, s)) << s;
}

TEST(GrammarMatcher, TooAmbiguousEndsWithAnError) {
  GrammarMatcher m(Grammar::parse(kAmbiguousNesting));
  size_t taken = 0;
  try {
    for (; taken < 20000; ++taken) ASSERT_TRUE(m.advance(static_cast<uint8_t>('1')));
    FAIL() << "20,000 digits and the state stayed small";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
  }
  EXPECT_GT(taken, 200u);  // hundreds of bytes before the limit
  EXPECT_FALSE(m.dead());  // the state before the refused byte is kept
}

// Random grammars of three rules referring to each other anywhere (nesting,
// recursion, nullable items, every repetition) against the naive recognizer
// on every string of up to 6 bytes over {a, b, c}; the left-recursive ones
// are refused at compile time and skipped.
TEST(GrammarMatcher, RandomRecursiveGrammarsAgreeWithANaiveRecognizer) {
  std::mt19937 rng(41);
  auto item = [&](int depth, auto& self) -> std::string {
    std::string atom;
    switch (depth > 0 ? rng() % 6 : rng() % 5) {
      case 0: atom = "\"a\""; break;
      case 1: atom = "\"bc\""; break;
      case 2: atom = "[bc]"; break;
      case 3: atom = "r" + std::to_string(rng() % 3); break;
      case 4: atom = "r" + std::to_string(rng() % 3); break;
      default: atom = "(" + self(depth - 1, self) + " | " + self(depth - 1, self) + ")";
    }
    static const char* const kReps[] = {"", "", "*", "+", "?", "{0,2}"};
    return atom + kReps[rng() % 6];
  };
  auto seq = [&](int depth, auto& self) -> std::string {
    std::string s;
    for (int k = static_cast<int>(rng() % 3); k >= 0; --k) s += " " + item(depth, self);
    return s;
  };
  int grammars = 0, refused = 0, checked = 0, matched = 0;
  while (grammars < 60) {
    std::string text = "root ::= r0\n";
    for (int r = 0; r < 3; ++r) {
      text += "r" + std::to_string(r) + " ::= " + seq(1, seq);
      if (rng() % 2) text += " | " + seq(1, seq);
      if (r > 0 && rng() % 2) text += " | \"c\"";
      text += "\n";
    }
    std::shared_ptr<const Grammar> g;
    try {
      g = Grammar::parse(text);
    } catch (const GrammarError& e) {
      ASSERT_NE(std::string(e.what()).find("left-recursive"), std::string::npos) << e.what();
      ++refused;
      continue;
    }
    ++grammars;
    SCOPED_TRACE(text);
    for (const std::string& s : strings_over_abc(6)) {
    const bool want = naive_accepts(*g, s);
    ASSERT_EQ(grammar_accepts(g, s), want) << "on \"" << s << "\"";
    ++checked;
    matched += want;
  }
  }
  EXPECT_GT(matched, checked / 50);
  std::printf("%d grammars (%d left-recursive refused), %d strings checked, %d matched\n",
              grammars, refused, checked, matched);
}

}  // namespace
}  // namespace pagellm
