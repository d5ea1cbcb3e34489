// Embeddings: how a sequence's final-normed hidden states (one row of n_embd
// per prompt position) become one vector. The rows arrive in position order,
// possibly over several steps (chunked prefill); the result does not depend
// on how they were chunked or batched, only on the rows themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace pagellm {

// llama.cpp's names and GGUF `{arch}.pooling_type` values: 1 mean, 2 cls,
// 3 last (0 none and 4 rank have no single-vector OpenAI form).
enum class Pooling : uint8_t { kMean = 1, kCls = 2, kLast = 3 };

const char* pooling_name(Pooling p);
// "mean", "cls", "last"; nullopt for anything else.
std::optional<Pooling> parse_pooling(std::string_view name);
// The GGUF key's value when it names mean, cls or last; else nullopt.
std::optional<Pooling> pooling_from_gguf(int64_t value);

class EmbeddingPooler {
 public:
  EmbeddingPooler(Pooling pooling, int64_t n_embd, int64_t n_tokens);
  // Starts over (the sequence is computed again after a preemption).
  void reset();
  // The rows of positions [pos, pos + n), each n_embd floats.
  void add(int64_t pos, const float* rows, int64_t n);
  // Every position added once, in order.
  bool complete() const { return next_ == n_tokens_; }
  // The pooled vector, L2-normalized (a zero vector stays zero).
  std::vector<float> result() const;

 private:
  Pooling pooling_;
  int64_t n_embd_, n_tokens_;
  int64_t next_ = 0;         // the next position expected
  std::vector<double> acc_;  // mean: the running sum (float64, position order); cls/last: the row
};

}  // namespace pagellm
