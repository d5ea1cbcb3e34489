// Tokenizer throughput on about 1 MB of text, for the GPT-2 (byte-level BPE)
// and Llama 2 (SentencePiece) vocabularies:
//
//   build/bench/bench_tokenizer [--benchmark_filter=...]
//
// Texts: "prose", English-like sentences drawn from a fixed word list with a
// fixed seed (words, numbers, punctuation, newlines); "mixed", the tokenizer
// test-vector inputs repeated (many scripts, emoji, whitespace runs). Encode
// reports bytes of text per second; Decode, bytes of text rebuilt per second.
#include <benchmark/benchmark.h>

#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace {

constexpr size_t kTextBytes = 1 << 20;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string prose_text() {
  static const char* kWords[] = {
      "the",    "a",     "and",    "of",        "to",      "in",     "was",      "she",
      "he",     "it",    "little", "girl",      "dog",     "ran",    "happy",    "big",
      "tree",   "sun",   "said",   "played",    "friends", "garden", "together", "because",
      "wanted", "found", "house",  "beautiful", "morning", "water",  "quickly",  "remembered",
      "Lily",   "Tom",   "Mia",    "don't",     "it's",    "they'll"};
  static const char* kPunct[] = {",", ".", "!", "?", ";", ":"};
  std::mt19937 rng(42);
  std::string out;
  out.reserve(kTextBytes + 64);
  bool start = true;
  while (out.size() < kTextBytes) {
    std::string w = kWords[rng() % std::size(kWords)];
    if (rng() % 20 == 0) w = std::to_string(rng() % 100000);
    if (start) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    if (!start) out += ' ';
    out += w;
    start = false;
    if (rng() % 8 == 0) {
      out += kPunct[rng() % std::size(kPunct)];
      if (rng() % 4 == 0) out += (rng() % 3 == 0) ? "\n\n" : "\n";
      start = out.back() == '\n' || out.back() == '.';
    }
  }
  return out;
}

std::string mixed_text() {
  const std::string inp =
      read_file(std::string(PAGELLM_TEST_DATA) + "/tokenizer-vectors/ggml-vocab-gpt-2.gguf.inp");
  std::string out;
  while (out.size() < kTextBytes) out += inp;
  return out;
}

const std::string& text(int which) {
  static const std::string prose = prose_text(), mixed = mixed_text();
  return which == 0 ? prose : mixed;
}

const pagellm::Tokenizer& tokenizer(int which) {
  static std::unique_ptr<pagellm::Tokenizer> toks[2];
  static const char* kFiles[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"};
  if (!toks[which]) {
    auto file = pagellm::GgufFile::open(std::string(PAGELLM_TEST_DATA) + "/tokenizer-vectors/" +
                                        kFiles[which]);
    toks[which] = pagellm::Tokenizer::from_gguf(*file);
  }
  return *toks[which];
}

// range(0): vocab (0 gpt-2, 1 llama-spm); range(1): text (0 prose, 1 mixed).
void BM_Encode(benchmark::State& state) {
  const auto& tok = tokenizer(static_cast<int>(state.range(0)));
  const std::string& t = text(static_cast<int>(state.range(1)));
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok.encode(t, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * t.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["bytes_per_token"] = static_cast<double>(t.size()) / n_tokens;
}

void BM_Decode(benchmark::State& state) {
  const auto& tok = tokenizer(static_cast<int>(state.range(0)));
  const std::string& t = text(static_cast<int>(state.range(1)));
  const auto ids = tok.encode(t, false);
  for (auto _ : state) {
    std::string s = tok.decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * t.size()));
}

void vocab_and_text(benchmark::internal::Benchmark* b) {
  b->ArgNames({"vocab", "text"});
  for (int v : {0, 1})
    for (int t : {0, 1}) b->Args({v, t});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_Encode)->Apply(vocab_and_text);
BENCHMARK(BM_Decode)->Apply(vocab_and_text);

}  // namespace

BENCHMARK_MAIN();
