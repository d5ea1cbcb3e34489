// The matcher's graph-structured stack: grammars ambiguous in how deep they
// nest keep a few tops, random recursive grammars agree with a naive
// recognizer on every short string (also when the arena is compacted at
// every byte), a long masked JSON output keeps a bounded arena, a large enum
// is followed, and a grammar too ambiguous to follow ends with an error.
#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <set>

#include "grammar/token_mask.h"
#include "short_strings.h"
#include "support/test_support.h"
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

TEST(GrammarMatcher, LongJsonKeepsTheArenaToWhatItsStateReaches) {
  const auto g = Grammar::parse(R"G(
root  ::= value
value ::= "{" ws (pair ("," ws pair)*)? "}" ws | "[" ws (value ("," ws value)*)? "]" ws |
          "\"" [a-z]* "\"" ws | [0-9]+ ws
pair  ::= "\"" [a-z]+ "\"" ws ":" ws value
ws    ::= " "?
)G");
  // ~60 KB of randomly nested JSON (many distinct stacks), masked as a model
  // would see it: the mask walks of new states are what leave garbage behind.
  std::mt19937 rng(9);
  auto value = [&](int depth, auto& self) -> std::string {
    switch (depth > 0 ? rng() % 4 : 2 + rng() % 2) {
      case 0: {
        std::string o = "{";
        for (int k = static_cast<int>(rng() % 4); k > 0; --k)
          o += (o.size() > 1 ? ", \"" : "\"") + std::string(1 + rng() % 3, 'k') + "\": " +
               self(depth - 1, self);
        return o + "}";
      }
      case 1: {
        std::string a = "[";
        for (int k = static_cast<int>(rng() % 4); k > 0; --k)
          a += (a.size() > 1 ? ", " : "") + self(depth - 1, self);
        return a + "]";
      }
      case 2: return "\"" + std::string(rng() % 4, 'x') + "\"";
      default: return std::to_string(rng() % 1000);
    }
  };
  std::string text = "[";
  while (text.size() < 60000) text += (text.size() > 1 ? ", " : "") + value(10, value);
  text += "]";
  std::set<std::string> pieces;
  for (size_t at = 0; at < 2000; ++at)
    for (size_t len = 1; len <= 4; ++len) pieces.insert(text.substr(at, len));
  auto vocab = std::make_shared<GrammarVocab>(
      std::vector<std::string>(pieces.begin(), pieces.end()), std::vector<int32_t>{});
  size_t most = 0, plain_end = 0;
  for (const bool compacting : {true, false}) {
    GrammarMatcher m(g);
    if (!compacting) m.set_compaction_threshold(SIZE_MAX);
    TokenMasker masker(vocab);
    for (size_t at = 0; at < text.size(); at += 3) {
      const TokenMask& mask = masker.mask(m);
      const std::string piece = text.substr(at, 3);
      if (pieces.count(piece)) {  // a token of the vocabulary: the mask allows it
        const auto id = static_cast<int32_t>(std::distance(pieces.begin(), pieces.find(piece)));
        ASSERT_TRUE(mask_allows(mask, id)) << "at byte " << at << ": " << piece;
      }
      ASSERT_TRUE(m.advance(piece));
      if (compacting) most = std::max(most, m.arena_size());
    }
    EXPECT_TRUE(m.accepting());
    if (!compacting) plain_end = m.arena_size();
  }
  // Without compaction the arena grows with the text (and would end a long
  // structured output at the 2^21 cap); with it, with the nesting only.
  EXPECT_LT(most, size_t{1} << 17);
  EXPECT_GT(plain_end, 4 * most) << most;
  std::printf("arena: at most %zu entries compacting, %zu at the end without\n", most, plain_end);
}

TEST(GrammarMatcher, AnEnumOfTwentyThousandValuesIsFollowed) {
  std::mt19937 rng(5);
  std::set<std::string> words;
  while (words.size() < 20000) {
    std::string w;
    for (int k = 3 + static_cast<int>(rng() % 7); k > 0; --k) w += static_cast<char>('a' + rng() % 10);
    words.insert(w);
  }
  std::string text = "root ::= \"[\" item (\", \" item)* \"]\"\nitem ::= \"\\\"\" (";
  for (const auto& w : words) text += (w == *words.begin() ? "\"" : " | \"") + w + "\"";
  text += ") \"\\\"\"\n";
  GrammarMatcher m(Grammar::parse(text));
  std::string input = "[";
  int n = 0;
  for (const auto& w : words)
    if (n++ % 997 == 0) input += (input.size() > 1 ? ", \"" : "\"") + w + "\"";
  input += "]";
  ASSERT_TRUE(m.advance(input));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.advance(std::string("[\"zzzzzzzzzz")));
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
  int grammars = 0, refused = 0, too_ambiguous = 0, checked = 0, matched = 0;
  // A quarter of them under the sanitizers (minutes there otherwise).
  while (grammars < (test::kSanitized ? 15 : 60)) {
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
    bool refused_mid_text = false;
    for (const std::string& s : strings_over_abc(6)) {
      const bool want = naive_accepts(*g, s);
      // Also a matcher that compacts its arena at every byte (ids renumbered).
      GrammarMatcher compacting(g);
      compacting.set_compaction_threshold(0);
      bool got = false, got_compacting = false;
      try {
        got = grammar_accepts(g, s);
        got_compacting = true;
        for (unsigned char b : s) got_compacting = got_compacting && compacting.advance(b);
        got_compacting = got_compacting && compacting.accepting();
      } catch (const Error& e) {
        // A grammar whose cost per byte explodes (nullable rules nesting in
        // each other) is refused, with this message, rather than followed.
        ASSERT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
        refused_mid_text = true;
        continue;
      }
      ASSERT_EQ(got, want) << "on \"" << s << "\"";
      ASSERT_EQ(got_compacting, want) << "on \"" << s << "\" (compacting)";
      ++checked;
      matched += want;
    }
    too_ambiguous += refused_mid_text;
  }
  EXPECT_GT(matched, checked / 50);
  EXPECT_LE(too_ambiguous, 3);  // the rare exploding grammar, not the rule
  std::printf("%d grammars (%d left-recursive refused, %d too ambiguous on some string), %d "
              "strings checked, %d matched\n",
              grammars, refused, too_ambiguous, checked, matched);
}

}  // namespace
}  // namespace pagellm
