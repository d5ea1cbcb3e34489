#include "engine/draft_length.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace pagellm {

void StepCostModel::record(int64_t rows, double seconds) {
  if (rows <= 0 || !(seconds > 0) || !std::isfinite(seconds)) return;
  if (static_cast<size_t>(rows) >= rows_.size()) rows_.resize(static_cast<size_t>(rows) + 1);
  Recent& r = rows_[static_cast<size_t>(rows)];
  r.seconds[r.count % kWindow] = seconds;
  r.at[r.count % kWindow] = clock_++;
  ++r.count;
}

std::pair<double, int> StepCostModel::fresh(int64_t rows) const {
  double best = std::numeric_limits<double>::infinity();
  int n = 0;
  if (rows <= 0 || static_cast<size_t>(rows) >= rows_.size()) return {best, n};
  const Recent& r = rows_[static_cast<size_t>(rows)];
  for (int i = 0; i < std::min(r.count, kWindow); ++i)
    if (clock_ - r.at[i] <= kMaxAge) {
      best = std::min(best, r.seconds[i]);
      ++n;
    }
  return {best, n};
}

bool StepCostModel::trusted(int64_t rows) const { return fresh(rows).second >= kMinSamples; }

double StepCostModel::estimate(int64_t rows) const {
  auto prior = [](int64_t r) { return 1.0 + kPriorRowCost * static_cast<double>(r - 1); };
  auto at = [this](int64_t r) { return fresh(r).first; };
  const auto size = static_cast<int64_t>(rows_.size());
  int64_t lo = std::min(rows, size) - 1, hi = rows + 1;
  while (lo > 0 && !trusted(lo)) --lo;
  while (hi < size && !trusted(hi)) ++hi;
  if (lo > 0 && hi < size) {
    const double t = static_cast<double>(rows - lo) / static_cast<double>(hi - lo);
    return at(lo) + t * (at(hi) - at(lo));
  }
  if (lo > 0) {
    // Past the last trusted row count: the slope to it from the one before
    // (the kernels' tiles make later rows cost more, not less), at least the prior's.
    double slope = 0;
    int64_t before = lo - 1;
    while (before > 0 && !trusted(before)) --before;
    if (before > 0) slope = (at(lo) - at(before)) / static_cast<double>(lo - before);
    return std::max(at(lo) + slope * static_cast<double>(rows - lo),
                    at(lo) * prior(rows) / prior(lo));
  }
  if (hi < size) return at(hi) * prior(rows) / prior(hi);
  return prior(rows);
}

double StepCostModel::cost(int64_t rows) const {
  rows = std::max<int64_t>(rows, 1);
  const auto [best, n] = fresh(rows);
  if (n >= kMinSamples) return best;
  // Fewer steps than trusted: each missing one counts as the neighbours' estimate.
  const double missing = kMinSamples - n;
  return ((n > 0 ? n * best : 0.0) + missing * estimate(rows)) / kMinSamples;
}

double expected_tokens(double p, int32_t k) {
  double sum = 1, term = 1;
  for (int32_t j = 0; j < k; ++j) sum += term *= p;
  return sum;
}

std::vector<int32_t> choose_draft_lengths(std::span<const double> p, std::span<const int32_t> caps,
                                          int64_t base_rows,
                                          const std::function<double(int64_t)>& cost) {
  const size_t n = std::min(p.size(), caps.size());
  std::vector<int32_t> k(n, 0), best_k(n, 0);
  std::vector<double> next_gain(n);  // p^(k+1): the next draft token's expected tokens
  for (size_t i = 0; i < n; ++i) next_gain[i] = std::clamp(p[i], 0.0, 1.0);
  base_rows = std::max<int64_t>(base_rows, 1);
  double tokens = static_cast<double>(base_rows);
  double best = tokens / cost(base_rows);
  for (int64_t extra = 1;; ++extra) {
    size_t pick = n;
    for (size_t i = 0; i < n; ++i)
      if (k[i] < caps[i] && (pick == n || next_gain[i] > next_gain[pick])) pick = i;
    if (pick == n) break;
    tokens += next_gain[pick];
    ++k[pick];
    next_gain[pick] *= std::clamp(p[pick], 0.0, 1.0);
    const double value = tokens / cost(base_rows + extra);
    if (value > best * (1 + 1e-12)) {  // more rows only for a real gain
      best = value;
      best_k = k;
    }
  }
  return best_k;
}

}  // namespace pagellm
