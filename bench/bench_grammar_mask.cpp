// One grammar state's token mask, computed (not looked up in the cache) on
// a real vocabulary, with whole byte classes set at once (classes=1) and
// with every token walked through the trie (classes=0, as before):
//
//   bench_grammar_mask [--benchmark_filter=...]
//   (before/after interleaved: --benchmark_repetitions=9
//    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true)
//
// Vocabularies (tests/data/tokenizer-vectors): 0 GPT-2 (byte-level BPE,
// 50,257 tokens, SmolLM2's kind), 1 Llama 2 SentencePiece (32,000). States
// of one JSON Schema: 0 inside an unbounded string, 1 inside a number's
// digits (bounded, [0-9]{0,15}: GPT-2 has a 16-digit token, so the digits
// class is not taken whole there, and the check's cost shows), 2 inside a
// string with maxLength 24 (taken whole only where the class's longest
// token fits in what is left), 3 after a property's colon (structure).
// Before timing, the two masks are checked equal.
//
// Reply: a whole constrained reply, as the engine masks it (a mask per token
// through a fresh MaskCache, then the token taken), over bench/grammar_bench.sh's
// schema: 1,500 tokens drawn at random among the allowed ones that do not
// close an array where another may come (fixed seed), per token.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "engine/sample_output.h"
#include "gguf/gguf_reader.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace pagellm;

const std::shared_ptr<const GrammarVocab>& vocab(int which) {
  static std::shared_ptr<const GrammarVocab> vocabs[2];
  static const char* kFiles[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"};
  if (!vocabs[which]) {
    auto file = GgufFile::open(std::string(PAGELLM_TEST_DATA) + "/tokenizer-vectors/" + kFiles[which]);
    vocabs[which] = make_grammar_vocab(*Tokenizer::from_gguf(*file));
  }
  return vocabs[which];
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

const std::shared_ptr<const Grammar>& grammar() {
  static const auto g = Grammar::parse(json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
    "type": "object", "properties": {"text": {"type": "string"}, "score": {"type": "number"},
      "name": {"type": "string", "maxLength": 24}},
    "required": ["text", "score", "name"], "additionalProperties": false})")));
  return g;
}

const char* const kPrefixes[] = {R"({"text": "The quick brown fox jumps)", R"({"text": "", "score": 123)",
                                 R"({"text": "", "score": 1, "name": "Ali)", R"({"text":)"};

void BM_Mask(benchmark::State& state) {
  const auto& v = vocab(static_cast<int>(state.range(0)));
  GrammarMatcher m(grammar());
  if (!m.advance(std::string(kPrefixes[state.range(1)]))) {
    state.SkipWithError("the prefix does not match the schema");
    return;
  }
  TokenMasker fast(v), full(v);
  full.set_class_skip(false);
  TokenMask want, got;
  full.compute_uncached(m, want);
  fast.compute_uncached(m, got);
  if (got != want) {
    state.SkipWithError("the masks differ");
    return;
  }
  TokenMasker& masker = state.range(2) ? fast : full;
  for (auto _ : state) {
    masker.compute_uncached(m, got);
    benchmark::DoNotOptimize(got.data());
  }
  int64_t allowed = 0;
  for (int32_t id = 0; id < v->n_tokens(); ++id) allowed += mask_allows(got, id);
  state.counters["allowed"] = static_cast<double>(allowed);
  state.counters["admitted_classes"] = fast.admitted_classes(m);
  // The longest token of the string-body and digit classes: a bounded
  // repetition admits a class only with at least this many bytes left.
  state.counters["longest_string_body"] = static_cast<double>(v->classes().max_length(0));
  state.counters["longest_digits"] = static_cast<double>(v->classes().max_length(1));
}

// bench/grammar_bench.sh's schema (strings with maxLength, bounded integers,
// an enum, a number) and a reply of `n` tokens drawn among the allowed ones.
std::vector<int32_t> reply_tokens(const std::shared_ptr<const GrammarVocab>& vocab,
                                  const std::shared_ptr<const Grammar>& g, size_t n) {
  const GrammarVocab& v = *vocab;
  GrammarMatcher m(g);
  TokenMasker masker(vocab);
  std::mt19937 rng(11);
  std::vector<int32_t> out, allowed, open;
  while (out.size() < n) {
    const TokenMask& mask = masker.mask(m);
    allowed.clear();
    open.clear();
    for (int32_t id = 0; id < v.n_tokens(); ++id) {
      if (v.is_eog(id) || !mask_allows(mask, id)) continue;
      allowed.push_back(id);
      // Not closing an array where something else may come: the reply goes on.
      if (v.bytes(id).find(']') == std::string::npos) open.push_back(id);
    }
    if (!open.empty()) allowed.swap(open);
    if (allowed.empty()) break;
    out.push_back(allowed[rng() % allowed.size()]);
    m.advance(v.bytes(out.back()));
  }
  return out;
}

void BM_Reply(benchmark::State& state) {
  const auto& v = vocab(static_cast<int>(state.range(0)));
  static const auto g = Grammar::parse(json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
    "type": "array", "items": {"type": "object", "properties": {
      "id": {"type": "integer", "minimum": 0, "maximum": 99999},
      "name": {"type": "string", "maxLength": 24}, "kind": {"enum": ["alpha", "beta", "gamma"]},
      "score": {"type": "number"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
      "required": ["id", "name", "kind", "score", "tags"], "additionalProperties": false}})")));
  static std::vector<int32_t> tokens[2];
  auto& toks = tokens[state.range(0)];
  if (toks.empty()) toks = reply_tokens(v, g, 1500);
  for (auto _ : state) {
    GrammarMatcher m(g);
    TokenMasker masker(v);
    masker.set_class_skip(state.range(1) != 0);
    for (int32_t t : toks) {
      benchmark::DoNotOptimize(masker.shared_mask(m).get());
      m.advance(v->bytes(t));
    }
    state.counters["misses"] = static_cast<double>(masker.misses());
  }
  state.counters["tokens"] = static_cast<double>(toks.size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * toks.size()));
}

BENCHMARK(BM_Reply)
    ->ArgNames({"vocab", "classes"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", min_of);

BENCHMARK(BM_Mask)
    ->ArgNames({"vocab", "state", "classes"})
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min", min_of);

}  // namespace

BENCHMARK_MAIN();
