// Speculative decoding's draft length: the measured cost of a decode step by
// its number of rows, and the choice of each sequence's draft length that
// maximises the tokens a step is expected to emit per second.
//
// A step's cost is not linear in its rows: the CPU kernels multiply a weight
// block with a tile of several rows at once (4 for Q4_1, 3 for Q8_0), so rows
// up to a tile's width cost little and the next one costs a second pass.
// Hence a table measured per row count rather than a fitted slope.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace pagellm {

// Decode step time by rows (every row a token that gets logits: decoding
// sequences and their drafts): for each row count, the fastest of its last
// kWindow steps within the last kMaxAge recorded. Other processes only ever
// add time to a step, so the fastest recent one is the estimate that row
// counts measured at different moments of a shared machine's load still
// compare by. A row count is trusted with kMinSamples such steps; before
// that (and once they age out) each missing step counts as what its trusted
// neighbours suggest: one slow step (the first with a new size touches new
// memory) does not rule it out for good, nor does an optimistic guess get
// tried again and again.
class StepCostModel {
 public:
  // A decode step of `rows` rows took `seconds`.
  void record(int64_t rows, double seconds);
  // Its estimated seconds: a trusted row count's fastest recent step. Others
  // mix their steps with the interpolation between the trusted neighbours;
  // past the last, its slope from the one before (at least the prior's:
  // 1 + kPriorRowCost per extra row, scaled); below the first, the prior
  // scaled to it; nothing trusted, the prior itself (only ratios matter).
  double cost(int64_t rows) const;
  bool trusted(int64_t rows) const;

  // An extra row's prior cost, as a fraction of a one-row step: below what
  // SmolLM2-135M measures past a tile (~30%), about its rows 2-4 (~9%), so
  // that row counts get tried (and then measured) without costly guesses.
  static constexpr double kPriorRowCost = 0.1;
  static constexpr int kWindow = 8;
  static constexpr int kMinSamples = 3;
  static constexpr int64_t kMaxAge = 1000;

 private:
  struct Recent {
    double seconds[kWindow] = {};
    int64_t at[kWindow] = {};  // record() count when taken
    int count = 0;             // recorded so far (the window holds the last kWindow)
  };
  // The fastest fresh step of `rows` (infinity: none) and how many are fresh.
  std::pair<double, int> fresh(int64_t rows) const;
  double estimate(int64_t rows) const;  // from the trusted neighbours

  std::vector<Recent> rows_;  // by row count
  int64_t clock_ = 0;         // steps recorded
};

// Expected tokens one sequence emits in a step with `k` drafted tokens, each
// accepted with probability `p` when those before it were: 1 + p + ... + p^k.
double expected_tokens(double p, int32_t k);

// Draft lengths k[i] <= caps[i] for sequences whose drafts are each accepted
// with probability p[i] (given the ones before), in a step of `base_rows`
// rows without drafts (each emitting one token): the k that maximise
//   (base_rows + sum_i (expected_tokens(p[i], k[i]) - 1)) / cost(base_rows + sum_i k[i]),
// with fewer rows among equal values. Each extra draft token gains less
// than the one before it (p^j falls with j), so taking the best next token
// over all sequences, one at a time, gives the most tokens for every total;
// the best total is then a scan.
std::vector<int32_t> choose_draft_lengths(std::span<const double> p, std::span<const int32_t> caps,
                                          int64_t base_rows,
                                          const std::function<double(int64_t)>& cost);

}  // namespace pagellm
