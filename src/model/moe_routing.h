// Mixture-of-experts routing: from a step's router logits to each token's
// experts and weights, and the step's tokens grouped by expert so that each
// expert's matrices are read once per step (model/blocks.h: moe_ffn_block).
//
// Per token, independently of the other tokens of the step (batch
// invariance): scores = softmax(logits) (or sigmoid), the k experts with the
// highest score (+ bias, when given: selection only), ties to the lower id;
// weights = their scores, divided by their sum when renormalising, times
// `scale`. Slots are in selection order (highest first), which is also the
// order their outputs are summed in. kSoftmaxOfChosen (gpt-oss): the k
// highest raw logits, weights = softmax over those k only (renormalize and
// bias do not apply).
#pragma once

#include <cstdint>
#include <vector>

namespace pagellm {

enum class ExpertGating { kSoftmax, kSigmoid, kSoftmaxOfChosen };

struct RouterOptions {
  ExpertGating gating = ExpertGating::kSoftmax;
  bool renormalize = true;  // weights of the chosen experts sum to 1 (times scale)
  float scale = 1.0f;
};

struct MoeRouting {
  int64_t n_tokens = 0;
  int32_t k = 0;
  std::vector<int32_t> expert;  // [n_tokens * k]: token t's slot j expert
  std::vector<float> weight;    // [n_tokens * k]
  // The step's (token, slot) pairs grouped by expert, tokens ascending:
  // expert e has grouped rows [offsets[e], offsets[e + 1]).
  std::vector<int32_t> offsets;    // [n_expert + 1]
  std::vector<int32_t> row_token;  // [n_tokens * k]: the token of each grouped row
  std::vector<int32_t> slot_row;   // [n_tokens * k]: the grouped row of (t, j)
};

// logits [n_tokens][n_expert] (host memory); bias [n_expert] or null.
// 1 <= k <= n_expert.
void route_tokens(const float* logits, int64_t n_tokens, int32_t n_expert, int32_t k,
                  const RouterOptions& opts, const float* bias, MoeRouting& out);

}  // namespace pagellm
