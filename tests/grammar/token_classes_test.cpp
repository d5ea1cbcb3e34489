// Token masks that set whole byte classes at once (grammar/token_classes.h)
// against the naive reference (each token stepped through the matcher) and
// against the full trie walk: random grammars built from free-text, digit
// and whitespace items with bounded and unbounded repetitions, and JSON
// Schema / GBNF states where every string of a class up to its longest
// token is taken (the fast path fires) or a class is taken only in part
// (near a maxLength's end, a pattern, an enum: it must not).
#include "grammar/token_classes.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "naive_takes.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

constexpr ClassSet kStringBody = 1, kDigits = 2, kSpace = 4, kPrintable = 8;

// Tokens of every class and of none: runs of 1 to 6 bytes drawn from one
// palette each (digits, whitespace, letters and spaces, printable ASCII,
// with quotes, backslashes, control bytes and UTF-8), single bytes, an empty
// token and an end-of-generation token last. Every class's longest token
// has 6 bytes (checked below: the expectations count on it).
std::shared_ptr<GrammarVocab> make_vocab(std::mt19937& rng) {
  static const std::string kPalettes[] = {
      "0123456789", " \t\n\r", "abcxyz Q_-.", "abc\"\\ 1", "ab\x01\x7f", "a \xc3\xa9\xe2\x82\xac",
      "!#$%&'()*+,/:;<=>?@[]^`{|}~ 7"};
  std::set<std::string> pieces;
  for (int b = 1; b < 256; b += (b < 128 ? 1 : 7)) pieces.insert(std::string(1, static_cast<char>(b)));
  for (int i = 0; i < 700; ++i) {
    const std::string& p = kPalettes[rng() % std::size(kPalettes)];
    std::string s;
    for (int k = 1 + static_cast<int>(rng() % 6); k > 0; --k) s.push_back(p[rng() % p.size()]);
    pieces.insert(s);
  }
  std::vector<std::string> toks(pieces.begin(), pieces.end());
  toks.emplace_back();  // never allowed
  const auto eos = static_cast<int32_t>(toks.size());
  toks.emplace_back();
  return std::make_shared<GrammarVocab>(toks, std::vector<int32_t>{eos});
}

struct Counts {
  int states = 0, fired = 0, partial = 0;
};

// The mask of `m`'s state three ways: through the cache with classes set
// whole, walked in full, and token by token (the reference); all equal.
// Counts states where a class fired, and where some but not all of a
// class's tokens are allowed (so it must not have fired).
void check_state(GrammarMatcher& m, const GrammarVocab& vocab, TokenMasker& fast,
                 TokenMasker& full, Counts& counts, const std::string& where) {
  const TokenMask& got = fast.mask(m);
  TokenMask walked;
  full.compute_uncached(m, walked);
  ASSERT_EQ(got, walked) << where;
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const bool want = vocab.is_eog(id) ? m.accepting() : takes(m, vocab.bytes(id));
    ASSERT_EQ(mask_allows(got, id), want) << where << ": token " << id << " \"" << vocab.bytes(id) << "\"";
  }
  const ClassSet admitted = fast.admitted_classes(m);
  ++counts.states;
  counts.fired += admitted != 0;
  for (int c = 0; c < kTokenClasses; ++c) {
    const auto& members = vocab.classes().members(c);
    bool any = false, all = true;
    for (size_t w = 0; w < members.size(); ++w) {
      any = any || (members[w] & got[w]);
      all = all && (members[w] & ~got[w]) == 0;
    }
    if ((admitted >> c) & 1) {
      ASSERT_TRUE(all) << where << ": class " << c << " set but not all taken";
    }
    counts.partial += any && !all;
  }
}

// A random walk of up to `steps` tokens through `g`, every state checked.
void walk(const std::shared_ptr<const Grammar>& g, const GrammarVocab& vocab,
          const std::shared_ptr<GrammarVocab>& shared, std::mt19937& rng, int steps, Counts& counts,
          const std::string& name) {
  GrammarMatcher m(g);
  if (rng() % 2) m.set_compaction_threshold(0);  // renumbered states at every token
  TokenMasker fast(shared), full(shared);
  full.set_class_skip(false);
  for (int step = 0; step < steps; ++step) {
    check_state(m, vocab, fast, full, counts, name + " step " + std::to_string(step));
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<int32_t> allowed;
    const TokenMask& mask = fast.mask(m);
    for (int32_t id = 0; id < vocab.n_tokens(); ++id)
      if (!vocab.is_eog(id) && mask_allows(mask, id)) allowed.push_back(id);
    if (allowed.empty()) return;
    ASSERT_TRUE(m.advance(vocab.bytes(allowed[rng() % allowed.size()])));
  }
}

TEST(TokenClasses, ClassesHoldExactlyTheTokensOfTheirBytes) {
  std::mt19937 rng(5);
  const auto vocab = make_vocab(rng);
  for (int c = 0; c < kTokenClasses; ++c) {
    const auto& bytes = token_class_bytes(c);
    for (int32_t id = 0; id < vocab->n_tokens(); ++id) {
      const std::string& s = vocab->bytes(id);
      bool want = !s.empty() && !vocab->is_eog(id);
      for (unsigned char b : s) want = want && std::count(bytes.begin(), bytes.end(), b) == 1;
      ASSERT_EQ(mask_allows(vocab->classes().members(c), id), want) << "class " << c << " token " << id;
    }
  }
  for (int c = 0; c < kTokenClasses; ++c) EXPECT_EQ(vocab->classes().max_length(c), 6u) << c;
  // The byte sets themselves: JSON string body, digits, whitespace, printable.
  EXPECT_EQ(token_class_bytes(0).size(), 95u - 2u);
  EXPECT_EQ(token_class_bytes(1).size(), 10u);
  EXPECT_EQ(token_class_bytes(2).size(), 4u);
  EXPECT_EQ(token_class_bytes(3).size(), 95u);
}

// Random grammars over class items (free text, digits, whitespace, letters,
// any character) with every kind of repetition, nested in up to three
// rules, against the naive reference and the full walk on random walks.
TEST(TokenClasses, RandomGrammarsMaskAsTheFullWalkAndTheReference) {
  std::mt19937 rng(61);
  const auto vocab = make_vocab(rng);
  auto item = [&](int depth, auto& self) -> std::string {
    static const char* const kAtoms[] = {R"([^"\\])", "[0-9]", R"([ \t\n])", "[a-z]", ".",
                                         R"([^\n])", R"("\"")", "\"ab\"", "[0-9a-f]", "\" \""};
    std::string atom;
    const unsigned pick = rng() % (depth > 0 ? 13 : 11);
    if (pick < std::size(kAtoms)) atom = kAtoms[pick];
    else if (pick == 10) atom = "r" + std::to_string(1 + rng() % 2);
    else atom = "(" + self(depth - 1, self) + " | " + self(depth - 1, self) + ")";
    static const char* const kReps[] = {"", "*", "*", "+", "?", "{0,3}", "{2,}", "{1,5}", "{3}"};
    return atom + kReps[rng() % std::size(kReps)];
  };
  auto seq = [&](int depth, auto& self) -> std::string {
    std::string s;
    for (int k = static_cast<int>(rng() % 3); k >= 0; --k) s += " " + item(depth, self);
    return s;
  };
  Counts counts;
  int grammars = 0;
  // A quarter of them under the sanitizers (minutes there otherwise).
  while (grammars < (test::kSanitized ? 20 : 80)) {
    std::string text = "root ::=" + seq(1, seq) + "\n";
    for (int r = 1; r < 3; ++r) {
      text += "r" + std::to_string(r) + " ::=" + seq(1, seq);
      if (rng() % 2) text += " | " + seq(1, seq);
      text += "\n";
    }
    std::shared_ptr<const Grammar> g;
    try {
      g = Grammar::parse(text);
    } catch (const GrammarError&) {
      continue;  // left-recursive
    }
    ++grammars;
    SCOPED_TRACE(text);
    try {
      walk(g, *vocab, vocab, rng, 12, counts, "random");
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
    }
    if (HasFatalFailure()) return;
  }
  // Both kinds of state were met: classes taken whole and taken in part.
  EXPECT_GT(counts.fired, counts.states / 10);
  EXPECT_GT(counts.partial, counts.states / 10);
  std::printf("%d states, %d with a class set whole, %d class(es) taken in part\n", counts.states,
              counts.fired, counts.partial);
}

struct StateCase {
  std::string name, gbnf, prefix;
  ClassSet admitted;  // exactly
};

std::string schema(const char* json) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(json));
}

// Hand-picked states: which classes fire (exactly), and the mask of each
// against the reference and the full walk.
TEST(TokenClasses, SchemaAndGbnfStatesFireExactlyWhereEveryStringOfAClassIsTaken) {
  const std::string str = schema(R"({"type": "string"})");
  const std::string obj = schema(R"({"type": "object", "properties": {"name": {"type": "string"},
    "n": {"type": "number"}, "id": {"type": "integer", "minimum": 0, "maximum": 99999}}})");
  const std::vector<StateCase> cases = {
      {"string start", str, "\"", kStringBody | kDigits},
      {"string middle", str, "\"ab c", kStringBody | kDigits},
      {"string after an escape", str, "\"a\\n", kStringBody | kDigits},
      {"inside an escape", str, "\"a\\", 0},
      {"minLength (a few states, then a loop)", schema(R"({"type": "string", "minLength": 2})"), "\"",
       kStringBody | kDigits},
      // 22 bytes left: every class token fits; 4 left: 5- and 6-byte ones do not.
      {"maxLength early", schema(R"({"type": "string", "maxLength": 24})"), "\"ab", kStringBody | kDigits},
      {"maxLength near its end", schema(R"({"type": "string", "maxLength": 24})"),
       "\"" + std::string(20, 'x'), 0},
      {"maxLength 2", schema(R"({"type": "string", "maxLength": 2})"), "\"", 0},
      {"pattern", schema(R"({"type": "string", "pattern": "^[a-z]+$"})"), "\"ab", 0},
      {"digit pattern", schema(R"({"type": "string", "pattern": "^[0-9]+$"})"), "\"1", kDigits},
      {"enum", schema(R"({"enum": ["alpha", "beta", "gamma"]})"), "\"", 0},
      {"property string", obj, "{\"name\": \"x", kStringBody | kDigits},
      {"number digits", obj, "{\"n\": 12", kDigits},
      {"bounded integer", obj, "{\"id\": 1", 0},
      {"gbnf free text", "root ::= [^\\n]* \"\\n\"", "ab", kStringBody | kDigits | kPrintable},
      {"gbnf digits then text", "root ::= [0-9]+ \" \" [a-z]*", "4", kDigits},
      {"gbnf whitespace", "root ::= \"{\" [ \\t\\n\\r]* \"}\"", "{", kSpace},
      {"gbnf bounded whitespace", "root ::= \"{\" [ \\t\\n\\r]{0,20} \"}\"", "{  ", kSpace},
      {"gbnf bounded whitespace near its end", "root ::= \"{\" [ \\t\\n\\r]{0,20} \"}\"",
       "{" + std::string(16, ' '), 0},
      {"gbnf whitespace without \\r", "root ::= \"{\" [ \\t\\n]* \"}\"", "{", 0},
  };
  std::mt19937 rng(3);
  const auto vocab = make_vocab(rng);
  for (const StateCase& c : cases) {
    SCOPED_TRACE(c.name + ": " + c.gbnf);
    GrammarMatcher m(Grammar::parse(c.gbnf));
    ASSERT_TRUE(m.advance(c.prefix));
    TokenMasker fast(vocab), full(vocab);
    full.set_class_skip(false);
    EXPECT_EQ(fast.admitted_classes(m), c.admitted);
    Counts counts;
    check_state(m, *vocab, fast, full, counts, c.name);
    if (HasFatalFailure()) return;
    // Near a bound's end the class is taken in part: the reason not to fire.
    if (c.name.find("near its end") != std::string::npos) EXPECT_GT(counts.partial, 0);
    // And onwards from there: random walks through the rest of the grammar.
    for (int run = 0; run < 3; ++run) walk(Grammar::parse(c.gbnf), *vocab, vocab, rng, 15, counts, c.name);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace pagellm
