#include "engine/speculation.h"

#include <algorithm>

namespace pagellm {

int32_t lookup_ngram(std::span<const int32_t> tokens, int32_t max_n, int32_t k,
                     std::vector<int32_t>& out) {
  out.clear();
  const int64_t size = static_cast<int64_t>(tokens.size());
  if (k <= 0 || max_n <= 0) return 0;
  const int32_t min_n = max_n == 1 ? 1 : 2;  // one token alone matches too often to pay
  for (int64_t n = std::min<int64_t>(max_n, size - 1); n >= min_n; --n) {
    const auto tail = tokens.subspan(static_cast<size_t>(size - n));
    // The most recent earlier occurrence: text repeats what it said last.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t take = std::min<int64_t>(k, size - from);
      out.assign(tokens.begin() + from, tokens.begin() + from + take);
      return static_cast<int32_t>(take);
    }
  }
  return 0;
}

int32_t SpecControl::next() {
  if (cooldown_ > 0) {
    --cooldown_;
    return 0;
  }
  return k_;
}

void SpecControl::record(int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
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
  k_ = accepted == proposed ? std::min(k_max_, std::max(k_, proposed) + 1)
                            : std::clamp(accepted + 1, 1, k_max_);
}

void NgramProposer::propose(std::span<const DraftWant> wants) {
  for (const DraftWant& w : wants) lookup_ngram(w.tokens, max_n_, w.k, *w.out);
}

}  // namespace pagellm
