// Masks shared across sequences: canonical state keys, the shared mask
// cache and the compiled-grammar cache, checked against a per-token
// reference walk of the grammar.
#include "grammar/mask_cache.h"

#include <gtest/gtest.h>

#include <list>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/regex_to_gbnf.h"
#include "grammar/state_canon.h"
#include "grammar/token_mask.h"
#include "naive_takes.h"

namespace pagellm {
namespace {

struct Case {
  const char* name;
  std::string gbnf;
  std::string sample;  // a text of the grammar: its pieces make up the vocabulary
};

std::vector<Case> cases() {
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "array", "items": {"type": "object",
    "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99999},
      "name": {"type": "string", "maxLength": 24}, "kind": {"enum": ["alpha", "beta", "gamma"]},
      "score": {"type": "number"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
    "required": ["id", "name", "kind", "score", "tags"], "additionalProperties": false}})");
  return {
      {"json_schema", json_schema_to_gbnf(schema),
       R"([{"id": 12, "name": "ab cd", "kind": "beta", "score": -1.5e3, "tags": ["x", "yz"]}, )"
       R"({"id": 99999, "name": "", "kind": "alpha", "score": 0, "tags": []}])"},
      {"regex", "root ::= \"\\\"\" (" + regex_to_gbnf("[a-z]{2,5}-\\d+(\\.\\d+)?(/[A-Z_]+)*") + ") \"\\\"\"",
       "\"abc-123.45/FOO_BAR/X\""},
      {"tool_call", R"G(
root   ::= "<tool_call>" ws call (ws "," ws call)* ws "</tool_call>"
call   ::= "{\"name\": " name ", \"arguments\": " object "}"
name   ::= "\"get_weather\"" | "\"search\"" | "\"send_mail\""
object ::= "{" ws (pair (ws "," ws pair)*)? ws "}"
pair   ::= string ws ":" ws value
value  ::= string | number | object | "true" | "false" | "null"
string ::= "\"" [a-zA-Z0-9 _.-]* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws     ::= [ \n]?
)G",
       R"(<tool_call> {"name": "search", "arguments": {"q": "pagellm kv", "n": 10, "deep": )"
       R"({"x": -1.25, "ok": true}}}, {"name": "get_weather", "arguments": {}} </tool_call>)"},
  };
}

// Pieces of the sample (1-4 bytes), every printable byte, some random byte
// strings, and an end-of-generation token last.
std::shared_ptr<GrammarVocab> make_vocab(const std::string& sample, std::mt19937& rng) {
  std::set<std::string> pieces;
  for (size_t at = 0; at < sample.size(); ++at)
    for (size_t len = 1; len <= 4 && at + len <= sample.size(); ++len)
      pieces.insert(sample.substr(at, len));
  for (int c = 32; c < 127; ++c) pieces.insert(std::string(1, static_cast<char>(c)));
  for (int i = 0; i < 100; ++i) {
    std::string s;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k)
      s.push_back(static_cast<char>(rng() % 256));
    pieces.insert(s);
  }
  std::vector<std::string> toks(pieces.begin(), pieces.end());
  const auto eos = static_cast<int32_t>(toks.size());
  toks.emplace_back();
  return std::make_shared<GrammarVocab>(toks, std::vector<int32_t>{eos});
}

// A random walk of `steps` tokens through `g`, masked by `masker` (whose
// cache may be shared); every mask is compared with the reference (each
// token tried on the grammar). Returns the tokens taken and the masks seen.
struct Walk {
  std::vector<int32_t> tokens;
  std::vector<std::shared_ptr<const TokenMask>> masks;
};
Walk checked_walk(const std::shared_ptr<const Grammar>& g, const GrammarVocab& vocab,
                  TokenMasker& masker, std::mt19937& rng, int steps, bool compact_always) {
  Walk w;
  GrammarMatcher m(g);
  GrammarMatcher ref(g);  // the reference's own matcher, fed the same tokens
  if (compact_always) m.set_compaction_threshold(0);
  for (int step = 0; step < steps; ++step) {
    auto mask = masker.shared_mask(m);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
      const bool want = vocab.is_eog(id) ? ref.accepting() : takes(ref, vocab.bytes(id));
      EXPECT_EQ(mask_allows(*mask, id), want) << "token " << id << " at step " << step;
      if (want && !vocab.is_eog(id)) allowed.push_back(id);
    }
    w.masks.push_back(mask);
    if (allowed.empty() || ::testing::Test::HasFailure()) break;
    const int32_t pick = allowed[rng() % allowed.size()];
    w.tokens.push_back(pick);
    EXPECT_TRUE(m.advance(vocab.bytes(pick)));
    EXPECT_TRUE(ref.advance(vocab.bytes(pick)));
  }
  return w;
}

TEST(MaskCache, SequencesOfOneGrammarShareMasksThatEqualTheReference) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(23);
    const auto vocab = make_vocab(c.sample, rng);
    ASSERT_TRUE(grammar_accepts(Grammar::parse(c.gbnf), c.sample));
    // Two requests with the same constraint compile it once.
    const auto g1 = compile_grammar_shared(c.gbnf);
    const auto g2 = compile_grammar_shared(c.gbnf);
    ASSERT_EQ(g1, g2);
    auto cache = std::make_shared<MaskCache>();
    size_t masks = 0;
    for (int seed = 0; seed < 6; ++seed) {
      // Sequence A walks at random; sequence B, another matcher of the same
      // grammar that compacts at every token (so its ids differ from A's),
      // takes the same tokens: each of its masks is A's cached one.
      TokenMasker a(vocab, cache), b(vocab, cache);
      std::mt19937 walk_rng(static_cast<uint32_t>(seed));
      const Walk wa = checked_walk(g1, *vocab, a, walk_rng, 60, seed % 2 == 1);
      ASSERT_FALSE(::testing::Test::HasFailure());
      GrammarMatcher mb(g2);
      mb.set_compaction_threshold(seed % 2 == 1 ? SIZE_MAX : 0);
      for (size_t i = 0; i < wa.masks.size(); ++i) {
        EXPECT_EQ(b.shared_mask(mb).get(), wa.masks[i].get()) << "step " << i;
        if (i < wa.tokens.size()) {
          ASSERT_TRUE(mb.advance(vocab->bytes(wa.tokens[i])));
        }
      }
      EXPECT_EQ(b.misses(), 0u);
      EXPECT_EQ(b.hits(), wa.masks.size());
      masks += wa.masks.size();
    }
    EXPECT_GT(masks, 40u);  // walks end where the grammar does: some are short
    const MaskCache::Stats s = cache->stats();
    EXPECT_GT(s.hits, s.misses);
    std::printf("%s: %zu masks cached, %llu hits, %llu misses\n", c.name, s.entries,
                static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses));
  }
}

TEST(MaskCache, EqualStatesReachedByDifferentTextsShareAKey) {
  // "[1" and "[7" (and "[12" for an item's digits) leave a JSON-like number
  // list in the same state; "[" alone does not.
  const auto g = Grammar::parse(R"(root ::= "[" [0-9]+ ("," [0-9]+)* "]")");
  GrammarStateCanon canon;
  auto key_after = [&](const std::string& text, uint64_t* uid) {
    GrammarMatcher m(g);
    EXPECT_TRUE(m.advance(text));
    GrammarStateCanon::Memo memo;
    std::vector<int32_t> key;
    canon.key(m, memo, key, uid);
    return key;
  };
  uint64_t u1 = 0, u2 = 0, u3 = 0;
  const auto k1 = key_after("[1", &u1), k2 = key_after("[7", &u2), k3 = key_after("[", &u3);
  EXPECT_EQ(u1, u2);
  EXPECT_EQ(k1, k2);
  EXPECT_NE(k1, k3);
  EXPECT_EQ(key_after("[1,2", &u1), key_after("[12,345", &u2));
}

TEST(MaskCache, EvictsTheLeastRecentlyUsedPastItsBytes) {
  // Against a list of the keys in use order.
  const TokenMask proto(16, 0);  // 128 bytes of mask
  MaskCache probe(SIZE_MAX);
  probe.insert(1, {0}, std::make_shared<TokenMask>(proto));
  const size_t one = probe.stats().bytes;
  MaskCache cache(5 * one);
  std::list<int32_t> model;  // newest first
  std::mt19937 rng(3);
  for (int op = 0; op < 2000; ++op) {
    const auto k = static_cast<int32_t>(rng() % 12);
    auto found = cache.find(1, {k});
    const auto it = std::find(model.begin(), model.end(), k);
    ASSERT_EQ(found != nullptr, it != model.end()) << "op " << op << " key " << k;
    if (it != model.end()) {
      model.erase(it);
      model.push_front(k);
      continue;
    }
    cache.insert(1, {k}, std::make_shared<TokenMask>(proto));
    model.push_front(k);
    if (model.size() > 5) model.pop_back();
    ASSERT_LE(cache.stats().bytes, 5 * one);
    ASSERT_EQ(cache.stats().entries, model.size());
  }
  // A key of another canon (uid) is another key.
  EXPECT_EQ(cache.find(2, {model.front()}), nullptr);
}

TEST(GrammarCache, CompilesOncePerTextAndStartRule) {
  const std::string text = "root ::= \"a\" other\nother ::= \"b\"+\n";
  const auto before = grammar_cache_stats();
  const auto g1 = compile_grammar_shared(text);
  const auto g2 = compile_grammar_shared(text);
  const auto g3 = compile_grammar_shared(text, "other");
  EXPECT_EQ(g1, g2);
  EXPECT_NE(g1, g3);
  EXPECT_TRUE(grammar_accepts(g1, "abb"));
  EXPECT_TRUE(grammar_accepts(g3, "bb"));
  EXPECT_FALSE(grammar_accepts(g3, "abb"));
  const auto after = grammar_cache_stats();
  EXPECT_EQ(after.compiles - before.compiles, 2u);
  EXPECT_EQ(after.hits - before.hits, 1u);
  EXPECT_THROW(compile_grammar_shared("root ::= (\"a\""), GrammarError);
  EXPECT_THROW(compile_grammar_shared("root ::= (\"a\""), GrammarError);  // not cached
}

}  // namespace
}  // namespace pagellm
