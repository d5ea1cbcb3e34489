// Perplexity of a model over a text, as llama-perplexity defines it: the
// tokens are cut into non-overlapping windows of n_ctx tokens (a shorter tail
// is dropped), each window starts afresh (its first token replaced by BOS when
// the vocabulary adds one), and only the second half of each window is scored:
// the logits at positions n_ctx/2 .. n_ctx-2 predict the next token.
// PPL = exp(mean NLL); its standard error is PPL x the standard error of the
// mean NLL.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/runner.h"
#include "util/thread_pool.h"

namespace pagellm {

struct PerplexityOptions {
  int32_t n_ctx = 512;
  int32_t batch = 512;  // tokens per forward pass
  int32_t block_size = 16;
  DType kv_type = DType::F16;
  int32_t bos = -1;  // replaces each window's first token; -1: keep it
};

struct PerplexityResult {
  double ppl = 0;
  double ppl_stderr = 0;
  double mean_nll = 0;
  int64_t tokens = 0;  // tokens scored
  int32_t windows = 0;
};

// Called after each window: windows done, of total, and the estimate so far.
using PerplexityProgress = std::function<void(int32_t done, int32_t total, double ppl)>;

// Runs the windows on the model as placed (a KV cache of one window on the
// devices that hold the layers). Throws ConfigError when the text has fewer
// than 2 x n_ctx tokens or n_ctx is under 4.
PerplexityResult perplexity(ModelRunner& model, const std::vector<int32_t>& tokens,
                            const PerplexityOptions& opts, ThreadPool& pool,
                            const PerplexityProgress& progress = {});

// -log softmax(logits)[target], in double.
double token_nll(const float* logits, int64_t n_vocab, int32_t target);

}  // namespace pagellm
