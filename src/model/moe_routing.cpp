#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>

namespace pagellm {

void route_tokens(const float* logits, int64_t n_tokens, int32_t n_expert, int32_t k,
                  const RouterOptions& opts, const float* bias, MoeRouting& out) {
  const size_t slots = static_cast<size_t>(n_tokens) * static_cast<size_t>(k);
  out.n_tokens = n_tokens;
  out.k = k;
  out.expert.resize(slots);
  out.weight.resize(slots);
  std::vector<float> score(static_cast<size_t>(n_expert)), key(static_cast<size_t>(n_expert));
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* l = logits + t * n_expert;
    if (opts.gating == ExpertGating::kSoftmax) {
      const float mx = *std::max_element(l, l + n_expert);
      float sum = 0;
      for (int32_t e = 0; e < n_expert; ++e) sum += score[static_cast<size_t>(e)] = std::exp(l[e] - mx);
      for (float& s : score) s /= sum;
    } else if (opts.gating == ExpertGating::kSigmoid) {
      for (int32_t e = 0; e < n_expert; ++e)
        score[static_cast<size_t>(e)] = 1.0f / (1.0f + std::exp(-l[e]));
    } else {  // chosen by raw logit; weights below
      for (int32_t e = 0; e < n_expert; ++e) score[static_cast<size_t>(e)] = l[e];
    }
    for (int32_t e = 0; e < n_expert; ++e)
      key[static_cast<size_t>(e)] = score[static_cast<size_t>(e)] + (bias ? bias[e] : 0.0f);
    for (int32_t e = 0; e < n_expert; ++e) order[static_cast<size_t>(e)] = e;
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      const float ka = key[static_cast<size_t>(a)], kb = key[static_cast<size_t>(b)];
      return ka != kb ? ka > kb : a < b;
    });
    if (opts.gating == ExpertGating::kSoftmaxOfChosen) {
      // Softmax over the chosen logits (order[0] holds the largest).
      const float mx = score[static_cast<size_t>(order[0])];
      for (int32_t j = 0; j < k; ++j) {
        float& s = score[static_cast<size_t>(order[static_cast<size_t>(j)])];
        s = std::exp(s - mx);
      }
    }
    float sum = 0;
    for (int32_t j = 0; j < k; ++j) sum += score[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int32_t j = 0; j < k; ++j) {
      const int32_t e = order[static_cast<size_t>(j)];
      float w = score[static_cast<size_t>(e)];
      if (opts.renormalize || opts.gating == ExpertGating::kSoftmaxOfChosen) w /= sum;
      const size_t s = static_cast<size_t>(t) * static_cast<size_t>(k) + static_cast<size_t>(j);
      out.expert[s] = e;
      out.weight[s] = w * opts.scale;
    }
  }
  // Counting sort by expert; tokens stay ascending within an expert.
  out.offsets.assign(static_cast<size_t>(n_expert) + 1, 0);
  for (int32_t e : out.expert) ++out.offsets[static_cast<size_t>(e) + 1];
  for (int32_t e = 0; e < n_expert; ++e)
    out.offsets[static_cast<size_t>(e) + 1] += out.offsets[static_cast<size_t>(e)];
  std::vector<int32_t> next(out.offsets.begin(), out.offsets.end() - 1);
  out.row_token.resize(slots);
  out.slot_row.resize(slots);
  for (size_t s = 0; s < slots; ++s) {
    const int32_t row = next[static_cast<size_t>(out.expert[s])]++;
    out.row_token[static_cast<size_t>(row)] = static_cast<int32_t>(s / static_cast<size_t>(k));
    out.slot_row[s] = row;
  }
}

}  // namespace pagellm
