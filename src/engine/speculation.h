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
// the most recent earlier occurrence of the longest matching n-gram. Returns
// the tokens written to `out` (cleared first).
int32_t lookup_ngram(std::span<const int32_t> tokens, int32_t max_n, int32_t k,
                     std::vector<int32_t>& out);

// How many tokens to draft for one sequence, from its recent acceptance:
// after a draft fully accepted k grows by one (up to the maximum), after a
// partial one it becomes accepted + 1; after two drafts in a row with
// nothing accepted the sequence stops drafting for a while (1, 2, 4, ... up
// to 64 steps), so that text that does not repeat itself costs almost nothing.
class SpecControl {
 public:
  explicit SpecControl(int32_t k_max = 4) : k_max_(k_max), k_(k_max) {}
  // Tokens to draft this step (0 while cooling down); call once per step.
  int32_t next();
  void record(int32_t proposed, int32_t accepted);
  int32_t k() const { return k_; }

 private:
  int32_t k_max_;
  int32_t k_;
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
