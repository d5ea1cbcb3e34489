// The GBNF engine on test grammars (arithmetic, JSON, bounded lists, Unicode
// classes) against strings that must and must not match, its errors, and the
// token masks against a brute-force check of every token on random states.
#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>
#include <regex>

#include "naive_takes.h"
#include "short_strings.h"
#include "grammar/token_mask.h"
#include "grammar/utf8_ranges.h"
#include "util/strings.h"

namespace pagellm {
namespace {

bool accepts(const std::string& grammar, const std::string& text) {
  return grammar_accepts(Grammar::parse(grammar), text);
}

const char* const kArithmetic = R"G(
root  ::= expr
expr  ::= term (("+" | "-") term)*
term  ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"     # nesting by recursion, not left recursion
number ::= [0-9]+
)G";

const char* const kJson = R"G(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)G";

TEST(Grammar, Arithmetic) {
  for (const char* good : {"1", "12+3", "(1+2)*3", "((7))", "1*2*3-4/5", "(1+(2*(3-4)))"})
    EXPECT_TRUE(accepts(kArithmetic, good)) << good;
  for (const char* bad : {"", "+", "1+", "(1", "1)", "1++2", "a", "()", "1 + 2"})
    EXPECT_FALSE(accepts(kArithmetic, bad)) << bad;
}

TEST(Grammar, Json) {
  for (const char* good :
       {"{}", "{\"a\": 1}", "{\"a\":[1,2,{\"b\":null}],\"c\":\"x\\ny\"}", "{\"k\": -0.5e+10}",
        "{\"u\": \"\\u00e9 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}", "{\"t\": true, \"f\": false}"})
    EXPECT_TRUE(accepts(kJson, good)) << good;
  for (const char* bad : {"[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\":01}", "{\"a\":\"\x01\"}",
                          "{\"a\":tru}", "{'a':1}", "{\"a\":1,}", "{\"a\":\"\\q\"}"})
    EXPECT_FALSE(accepts(kJson, bad)) << bad;
}

TEST(Grammar, RepetitionBounds) {
  const std::string g = R"G(root ::= item ("," item){1,3} ";"?
item ::= [a-c]{2} | "x"{0,1} "y")G";
  for (const char* good : {"ab,y", "ab,cc,xy,y", "ab,cc,xy,y;", "y,y"})
    EXPECT_TRUE(accepts(g, good)) << good;
  for (const char* bad : {"ab", "ab,cc,xy,y,y", "a,b", "abc,y", "xxy,y", "ab,y;;"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
  EXPECT_TRUE(accepts("root ::= \"a\"{3,}", "aaaaaa"));
  EXPECT_FALSE(accepts("root ::= \"a\"{3,}", "aa"));
  EXPECT_TRUE(accepts("root ::= \"ab\"{2}", "abab"));
  EXPECT_FALSE(accepts("root ::= \"ab\"{2}", "ababab"));
}

TEST(Grammar, UnicodeClassesMatchWholeCharacters) {
  const std::string g = "root ::= [\\u00e0-\\u00ff\\u4e00-\\u9fff]+ [^a-z]";
  EXPECT_TRUE(accepts(g, "\xc3\xa0\xe4\xb8\x80Z"));           // à 一 Z
  EXPECT_TRUE(accepts(g, "\xc3\xbf\xf0\x9f\x98\x80"));        // ÿ then any non a-z: 😀
  EXPECT_FALSE(accepts(g, "\xc3\xa0z"));                      // z is a-z
  EXPECT_FALSE(accepts(g, "\xc3\x9f" "Z"));                   // ß is U+00DF, outside
  EXPECT_FALSE(accepts(g, "\xc3\xa0\xc3"));                   // a cut character
  EXPECT_TRUE(accepts("root ::= .{3}", "a\xc3\xa9\xe2\x82\xac"));  // any three characters
  EXPECT_FALSE(accepts("root ::= .{3}", "ab"));
}

// The byte sequences of a range match exactly its code points' encodings.
TEST(Grammar, Utf8RangesCoverExactlyTheirCodePoints) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 200; ++iter) {
    std::uniform_int_distribution<uint32_t> cp(0, 0x10FFFF);
    uint32_t a = cp(rng), b = cp(rng);
    if (iter % 3 == 0) b = a + rng() % 3000;
    if (a > b) std::swap(a, b);
    b = std::min<uint32_t>(b, 0x10FFFF);
    const auto seqs = utf8_byte_sequences({{a, b}});
    auto matched = [&](uint32_t c) {
      std::string e;
      utf8_append(c, e);
      for (const auto& s : seqs) {
        if (s.size() != e.size()) continue;
        bool ok = true;
        for (size_t k = 0; k < s.size(); ++k)
          ok = ok && static_cast<uint8_t>(e[k]) >= s[k].first && static_cast<uint8_t>(e[k]) <= s[k].second;
        if (ok) return true;
      }
      return false;
    };
    for (int probe = 0; probe < 50; ++probe) {
      uint32_t c = cp(rng);
      if (probe < 10) c = std::min<uint32_t>(0x10FFFF, a + static_cast<uint32_t>(probe));
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      ASSERT_EQ(matched(c), c >= a && c <= b) << std::hex << a << "-" << b << " at " << c;
    }
  }
}

TEST(Grammar, ErrorsSayWhereAndWhat) {
  auto error = [](const std::string& g) -> std::pair<std::string, size_t> {
    try {
      Grammar::parse(g);
    } catch (const GrammarError& e) {
      return {e.what(), e.offset()};
    }
    return {"", 0};
  };
  auto [m1, o1] = error("root ::= \"abc");
  EXPECT_NE(m1.find("expected '\"'"), std::string::npos) << m1;
  EXPECT_EQ(o1, 13u);
  auto [m2, o2] = error("root ::= foo");
  EXPECT_NE(m2.find("undefined rule 'foo'"), std::string::npos) << m2;
  EXPECT_EQ(o2, 9u);
  EXPECT_NE(error("root ::= root \"a\"").first.find("left-recursive"), std::string::npos);
  EXPECT_NE(error("a ::= \"x\"").first.find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(error("root ::= [z-a]").first.find("range end"), std::string::npos);
  EXPECT_NE(error("root ::= \"a\"{5,2}").first.find("upper bound"), std::string::npos);
  EXPECT_NE(error("root ::= \"a\"{99999}").first.find("repetition bound"), std::string::npos);
  EXPECT_NE(error("root ::= \"a\"\nroot ::= \"b\"").first.find("defined twice"), std::string::npos);
  EXPECT_NE(error("root ::= (\"a\"").first.find("expected ')'"), std::string::npos);
  EXPECT_NE(error("root ::= \"\\q\"").first.find("an escape"), std::string::npos);
  // Left recursion through nullable items is refused wherever the cycle has
  // a reference that more of its alternative follows.
  EXPECT_NE(error("root ::= x \"a\"\nx ::= root? \"b\"").first.find("left-recursive"),
            std::string::npos);
  EXPECT_NE(error("root ::= \"a\" | root root").first.find("left-recursive"), std::string::npos);
  EXPECT_NE(error("root ::= (\"a\"? root)? \"b\"").first.find("left-recursive"), std::string::npos);
  EXPECT_NE(error("root = \"a\"").first.find("'::='"), std::string::npos);
}

// A small vocabulary of JSON-ish pieces and random bytes; on random states
// reached by walking allowed tokens, the mask equals advancing a copy of the
// matcher by every token's bytes.
// Nested repetitions (`. root*`, `(x x*)*`) are ambiguous: a text splits into
// the repetitions in many ways. The matcher folds a star waiting on the same
// star, so its state stays small however long the text, and it still accepts
// exactly the right texts.
// A star of a nullable item (`("a"?)*`, `(ws item?)*`) loops back to itself
// before a byte only through references that end their alternatives: the
// stacks do not grow, so it is accepted and matches what it should.
TEST(Grammar, StarsOfNullableItems) {
  EXPECT_TRUE(accepts("root ::= ( \"a\"? )*", ""));
  EXPECT_TRUE(accepts("root ::= ( \"a\"? )*", "aaaa"));
  EXPECT_FALSE(accepts("root ::= ( \"a\"? )*", "ab"));
  const char* const list = "root ::= (ws item?)* \".\"\nws ::= \" \"*\nitem ::= [a-z]+";
  EXPECT_TRUE(accepts(list, "."));
  EXPECT_TRUE(accepts(list, "ab  cd e."));
  EXPECT_FALSE(accepts(list, "ab  cd e"));
  EXPECT_FALSE(accepts(list, "A."));
  EXPECT_TRUE(accepts("root ::= x\nx ::= y | \"b\"\ny ::= x | \"c\"", "c"));  // a cycle of tail calls
}

TEST(Grammar, NestedStarsStaySmallOnLongTexts) {
  const char* const grammars[] = {"root ::= . root{0,}", "root ::= ([a-z] [a-z]*)*",
                                  "root ::= (. root?)*", "root ::= x*\nx ::= [a-z]+ x* | \"-\" x{0,}"};
  for (const char* text : grammars) {
    SCOPED_TRACE(text);
    GrammarMatcher m(Grammar::parse(text));
    size_t most = 0;
    for (int i = 0; i < 3000; ++i) {
      ASSERT_TRUE(m.advance(static_cast<uint8_t>('a' + i % 26)));
      most = std::max(most, m.stacks().size());
    }
    EXPECT_TRUE(m.accepting());
    EXPECT_LE(most, 64u);              // it was 9 per byte consumed
    EXPECT_LE(m.arena_size(), 256u);  // and the arena grew as fast
  }
  EXPECT_FALSE(accepts("root ::= (\"a\" \"b\"*)*", "ba"));
  EXPECT_TRUE(accepts("root ::= (\"a\" \"b\"*)*", "abbaab"));
}

// Random regular grammars (literals, classes, groups, alternatives, every
// repetition, nested) against std::regex, a naive backtracking matcher, on
// every short string over their alphabet.
TEST(Grammar, RandomRegularGrammarsAgreeWithRegex) {
  std::mt19937 rng(29);
  // One random expression as (GBNF, ECMAScript regex).
  // (std::regex backtracks without end on a star of a nullable item, so a
  // repeated atom here never matches the empty string; StarsOfNullableItems
  // covers those.) `nullable` says whether the whole expression does.
  std::function<std::pair<std::string, std::string>(int, bool&)> expr = [&](int depth, bool& nullable) {
    std::pair<std::string, std::string> out;
    nullable = true;
    const int items = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < items; ++i) {
      std::pair<std::string, std::string> atom;
      bool atom_nullable = false;
      switch (depth > 0 ? rng() % 5 : rng() % 3) {
        case 0: atom = {"\"a\"", "a"}; break;
        case 1: atom = {"\"ab\"", "ab"}; break;
        case 2: atom = {"[bc]", "[bc]"}; break;
        case 3: {
          auto [g, r] = expr(depth - 1, atom_nullable);
          atom = {"(" + g + ")", "(?:" + r + ")"};
          break;
        }
        default: {
          bool n1 = false, n2 = false;
          auto [g1, r1] = expr(depth - 1, n1);
          auto [g2, r2] = expr(depth - 1, n2);
          atom_nullable = n1 || n2;
          atom = {"(" + g1 + " | " + g2 + ")", "(?:" + r1 + "|" + r2 + ")"};
        }
      }
      static const char* const kReps[][2] = {{"", ""}, {"*", "*"}, {"+", "+"}, {"?", "?"},
                                             {"{2}", "{2}"}, {"{1,}", "{1,}"}, {"{0,2}", "{0,2}"}};
      static const int kBounded[] = {0, 3, 6};  // no unbounded repetition of a nullable atom
      const auto& rep = kReps[atom_nullable ? kBounded[rng() % 3] : rng() % 7];
      const std::string_view how = rep[0];
      const bool rep_nullable = how == "*" || how == "?" || how == "{0,2}";
      if (!atom_nullable && !rep_nullable) nullable = false;
      out.first += (i ? " " : "") + atom.first + rep[0];
      out.second += "(?:" + atom.second + ")" + rep[1];
    }
    return out;
  };
  int checked = 0, matched = 0;
  for (int trial = 0; trial < 150; ++trial) {
    bool nullable = false;
    const auto [g, r] = expr(2, nullable);
    SCOPED_TRACE("root ::= " + g + "   /" + r + "/");
    const auto grammar = Grammar::parse("root ::= " + g);
    const std::regex re(r);
    for (const std::string& s : strings_over_abc(6)) {
      const bool want = std::regex_match(s, re);
      ASSERT_EQ(grammar_accepts(grammar, s), want) << "on \"" << s << "\"";
      ++checked;
      matched += want;
    }
  }
  EXPECT_GT(matched, checked / 50);  // not a suite of grammars that match nothing
  std::printf("%d strings checked, %d matched\n", checked, matched);
}

TEST(TokenMask, EqualsBruteForceOnRandomStates) {
  std::mt19937 rng(17);
  std::vector<std::string> toks = {"", "{", "}", "{\"", "\":", "\"", ",", " ", "\n", "[", "]",
                                   "true", "false", "null", "0", "1", "12", "-", ".", "e", "+",
                                   "a", "ab", "abc", "\\", "\\n", "\\u00", "\xc3", "\xa9", "\xc3\xa9",
                                   "tr", "ue", "nul", "l", "\"a\":", "}]", "{}", "[]", ":", "x"};
  for (int i = 0; i < 200; ++i) {  // random byte strings
    std::string s;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) s.push_back(static_cast<char>(rng() % 128));
    toks.push_back(s);
  }
  const int32_t eos = static_cast<int32_t>(toks.size());
  toks.push_back("");
  auto vocab = std::make_shared<GrammarVocab>(toks, std::vector<int32_t>{eos});
  const auto g = Grammar::parse(kJson);
  int states = 0, hits = 0;
  for (int run = 0; run < 30; ++run) {
    GrammarMatcher m(g);
    // Every other walk compacts at every advance: the cache must not outlive
    // the renumbered states.
    if (run % 2) m.set_compaction_threshold(0);
    TokenMasker masker(vocab);
    for (int step = 0; step < 40; ++step) {
      const TokenMask mask = masker.mask(m);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->n_tokens(); ++id) {
        const bool want = id == eos ? m.accepting() : takes(m, toks[static_cast<size_t>(id)]);
        ASSERT_EQ(mask_allows(mask, id), want) << "token " << id << " at step " << step;
        if (want && id != eos) allowed.push_back(id);
      }
      ++states;
      if (allowed.empty()) break;
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.advance(toks[static_cast<size_t>(pick)]));
    }
    hits += static_cast<int>(masker.hits());
  }
  EXPECT_GT(states, 300);
  std::printf("%d states checked, %d mask cache hits\n", states, hits);
  // apply() blanks exactly the disallowed logits.
  GrammarMatcher m(g);
  TokenMasker masker(vocab);
  std::vector<float> logits(toks.size(), 1.0f);
  const int64_t n = TokenMasker::apply(masker.mask(m), logits.data(), static_cast<int64_t>(logits.size()));
  int64_t finite = 0;
  for (float v : logits) finite += v == 1.0f;
  EXPECT_EQ(n, finite);
  EXPECT_EQ(logits[1], 1.0f);               // "{" starts the object
  EXPECT_LT(logits[2], -1e30f);             // "}" cannot
  EXPECT_LT(logits[static_cast<size_t>(eos)], -1e30f);  // nothing matched yet
}

TEST(TokenMask, ApplyBlanksExactlyTheRefusedLogitsAtEveryLength) {
  // Word-at-a-time masking against a per-token reference: full, empty and
  // mixed words, and a vocabulary that ends inside a word.
  std::mt19937 rng(7);
  for (int64_t n : {1, 63, 64, 65, 130, 1000}) {
    for (int kind = 0; kind < 4; ++kind) {
      TokenMask mask((static_cast<size_t>(n) + 63) / 64, 0);
      for (int64_t i = 0; i < n; ++i) {
        const bool on = kind == 0 ? true : kind == 1 ? false : kind == 2 ? (i / 64) % 2 == 0
                                                                         : rng() % 3 == 0;
        if (on) mask[static_cast<size_t>(i >> 6)] |= uint64_t{1} << (i & 63);
      }
      // Bits past n must not count.
      if (n % 64) mask.back() |= ~uint64_t{0} << (n % 64);
      std::vector<float> logits(static_cast<size_t>(n));
      for (auto& x : logits) x = static_cast<float>(rng() % 100);
      std::vector<float> want = logits;
      int64_t want_allowed = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (mask_allows(mask, static_cast<int32_t>(i)))
          ++want_allowed;
        else
          want[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
      }
      EXPECT_EQ(TokenMasker::apply(mask, logits.data(), n), want_allowed) << n << " " << kind;
      EXPECT_EQ(logits, want) << n << " " << kind;
    }
  }
}

}  // namespace
}  // namespace pagellm
