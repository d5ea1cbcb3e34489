// Speculative decoding: proposers of drafted tokens, and the per-sequence
// control of how many to draft.
//
// A decoding sequence may carry k drafted tokens into a step; the model runs
// its last token and the drafts in one pass, and the engine samples each
// row in turn with the sequence's own sampler, keeping a row's token while
// it equals the draft it verified. Because the CPU kernels give a token's
// logits bit for bit whatever else is in the batch, and every draw advances
// the sampler's generator once, the tokens are exactly those of decoding
// without speculation, greedy or not (for a draft that is a point mass this
// sample-and-compare rule is the standard rejection-sampling rule).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagellm {

struct SpeculationConfig {
  // Prompt lookup: the longest n-gram (n from this down to 2; 1 if this is
  // 1) ending the text is searched earlier in the prompt and output, and
  // what followed it is drafted. 0: off.
  int32_t ngram = 0;
  // A draft model proposes (Engine::set_draft_proposer) instead of prompt lookup.
  bool draft_model = false;
  // Most drafted tokens per sequence and step.
  int32_t draft_max = 4;
  // No speculation in a step where more sequences decode: a batch already
  // reads each weight for many tokens, and drafts would only add compute.
  int32_t max_batch = 4;

  bool enabled() const { return (ngram > 0 || draft_model) && draft_max > 0 && max_batch > 0; }
  // Logit rows a step needs for drafts (SchedulerConfig::max_draft_rows).
  int32_t draft_rows() const { return enabled() ? draft_max * max_batch : 0; }
};

// Drafts up to `k` tokens by prompt lookup (see SpeculationConfig::ngram):
// what followed an earlier occurrence of the longest matching n-gram; of
// several, the one whose match reaches furthest back (up to
// kLookupContext tokens: code quoted again follows the copy whose
// surroundings it shares), the most recent of those. Returns the tokens
// written to `out` (cleared first).
inline constexpr int32_t kLookupContext = 64;
int32_t lookup_ngram(std::span<const int32_t> tokens, int32_t max_n, int32_t k,
                     std::vector<int32_t>& out);

// One sequence's acceptance statistics: the probability that a drafted token
// is accepted when those before it were (the accepted run of a draft as a
// geometric variable), from counts that decay every step, so that recent
// drafts count most and, with no drafts to count, the estimate returns to its
// prior of 1/2 and drafting is tried again; for choose_draft_lengths (engine/draft_length.h). A sequence whose draft
// was cut to nothing keeps its first token as a shadow, compared with the
// token the sequence emits next: prompt lookup costs microseconds, so the
// statistics follow the text (and drafting resumes when matches return)
// without spending rows on drafts that would be rejected.
// With `cooldown` (a draft model, whose drafts cost passes of their own),
// two drafts in a row with nothing accepted also stop proposing for a
// while: 1, 2, 4, ... up to 64 steps, reset by an accepted draft.
class SpecControl {
 public:
  explicit SpecControl(int32_t k_max = 4, bool cooldown = false)
      : k_max_(k_max), cooldown_enabled_(cooldown) {}
  // Most tokens to draft this step (0 while cooling down); once per step.
  int32_t next();
  // A verified draft: `accepted` of its `proposed` tokens (the run before
  // the first mismatch).
  void record(int32_t proposed, int32_t accepted);
  // A draft not verified: its first token, for position `position`.
  void shadow(int64_t position, int32_t token);
  // Before a step: a pending shadow compared with the sequence's tokens.
  void observe(std::span<const int32_t> tokens);
  // (accepted + 1) / (accepted + rejected + 2): a prior of one of each.
  double acceptance() const { return (accepted_ + 1) / (accepted_ + rejected_ + 2); }

  // The counts' decay per step.
  static constexpr double kDecay = 0.9;

 private:
  void count(double accepted, double rejected);

  int32_t k_max_;
  bool cooldown_enabled_;
  double accepted_ = 0, rejected_ = 0;
  int64_t shadow_position_ = -1;
  int32_t shadow_token_ = -1;
  int32_t misses_ = 0;    // drafts in a row with nothing accepted
  int32_t cooldown_ = 0;  // steps left without drafting
  int32_t backoff_ = 1;   // the next cooldown's length
};

// One sequence's want of drafted tokens in a step.
struct DraftWant {
  uint64_t seq_id;
  std::span<const int32_t> tokens;  // the sequence so far (prompt and output)
  int32_t k;                        // at most this many
  std::vector<int32_t>* out;        // filled with the draft (cleared first)
};

class StepCostModel;

// The step's draft lengths (choose_draft_lengths, engine/draft_length.h) for
// `wants`, whose sequences' statistics are controls[i], in a step of
// `base_rows` rows without drafts. With `proposed`, each at most its draft's
// length, and a sequence whose draft is cut to nothing gets the draft's first
// token as its shadow; else each at most its want's k.
std::vector<int32_t> fit_draft_lengths(std::span<const DraftWant> wants,
                                       std::span<SpecControl* const> controls, bool proposed,
                                       int64_t base_rows, const StepCostModel& cost);

// Proposes drafts for the step's decoding sequences (engine thread only).
class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  virtual void propose(std::span<const DraftWant> wants) = 0;
  // The sequence ended: what the proposer keeps for it can go.
  virtual void release(uint64_t /*seq_id*/) {}
};

class NgramProposer final : public DraftProposer {
 public:
  explicit NgramProposer(int32_t max_n) : max_n_(max_n) {}
  void propose(std::span<const DraftWant> wants) override;

 private:
  int32_t max_n_;
};

}  // namespace pagellm
