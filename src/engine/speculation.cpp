#include "engine/speculation.h"

#include <algorithm>

#include "engine/draft_length.h"

namespace pagellm {

int32_t lookup_ngram(std::span<const int32_t> tokens, int32_t max_n, int32_t k,
                     std::vector<int32_t>& out) {
  out.clear();
  const int64_t size = static_cast<int64_t>(tokens.size());
  if (k <= 0 || max_n <= 0) return 0;
  const int32_t min_n = max_n == 1 ? 1 : 2;  // one token alone matches too often to pay
  for (int64_t n = std::min<int64_t>(max_n, size - 1); n >= min_n; --n) {
    const auto tail = tokens.subspan(static_cast<size_t>(size - n));
    int64_t best = -1, best_len = 0;
    // Latest first, so that the most recent of equally long matches wins.
    for (int64_t start = size - n - 1; start >= 0 && best_len < kLookupContext; --start) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + start)) continue;
      int64_t len = n;  // how far back the match reaches
      while (len < kLookupContext && start - (len - n) - 1 >= 0 &&
             tokens[static_cast<size_t>(start - (len - n) - 1)] ==
                 tokens[static_cast<size_t>(size - len - 1)])
        ++len;
      if (len > best_len) {
        best = start;
        best_len = len;
      }
    }
    if (best < 0) continue;
    const int64_t from = best + n;
    const int64_t take = std::min<int64_t>(k, size - from);
    out.assign(tokens.begin() + from, tokens.begin() + from + take);
    return static_cast<int32_t>(take);
  }
  return 0;
}

int32_t SpecControl::next() {
  accepted_ *= kDecay;
  rejected_ *= kDecay;
  if (cooldown_ > 0) {
    --cooldown_;
    return 0;
  }
  return k_max_;
}

void SpecControl::count(double accepted, double rejected) {
  accepted_ += accepted;
  rejected_ += rejected;
}

void SpecControl::record(int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  accepted = std::clamp(accepted, 0, proposed);
  count(accepted, accepted < proposed ? 1 : 0);
  shadow_position_ = -1;
  if (!cooldown_enabled_) return;
  if (accepted == 0) {
    if (++misses_ >= 2) {
      cooldown_ = backoff_;
      backoff_ = std::min(backoff_ * 2, 64);
      misses_ = 0;
    }
  } else {
    misses_ = 0;
    backoff_ = 1;
  }
}

void SpecControl::shadow(int64_t position, int32_t token) {
  shadow_position_ = position;
  shadow_token_ = token;
}

void SpecControl::observe(std::span<const int32_t> tokens) {
  if (shadow_position_ < 0 || static_cast<int64_t>(tokens.size()) <= shadow_position_) return;
  const bool hit = tokens[static_cast<size_t>(shadow_position_)] == shadow_token_;
  count(hit ? 1 : 0, hit ? 0 : 1);
  shadow_position_ = -1;
}

std::vector<int32_t> fit_draft_lengths(std::span<const DraftWant> wants,
                                       std::span<SpecControl* const> controls, bool proposed,
                                       int64_t base_rows, const StepCostModel& cost) {
  std::vector<double> p;
  std::vector<int32_t> caps;
  for (size_t i = 0; i < wants.size(); ++i) {
    const DraftWant& w = wants[i];
    p.push_back(controls[i]->acceptance());
    caps.push_back(proposed ? std::min(w.k, static_cast<int32_t>(w.out->size())) : w.k);
  }
  std::vector<int32_t> k = choose_draft_lengths(p, caps, base_rows,
                                                [&cost](int64_t rows) { return cost.cost(rows); });
  if (proposed)
    for (size_t i = 0; i < wants.size(); ++i)
      if (k[i] == 0 && !wants[i].out->empty())
        controls[i]->shadow(static_cast<int64_t>(wants[i].tokens.size()), wants[i].out->front());
  return k;
}

void NgramProposer::propose(std::span<const DraftWant> wants) {
  for (const DraftWant& w : wants) lookup_ngram(w.tokens, max_n_, w.k, *w.out);
}

}  // namespace pagellm
