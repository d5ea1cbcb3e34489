// Restore or recompute (issue 54): restoring a block from a tier costs
// bytes / copy rate, computing it costs block_size / prefill rate (tokens
// per second of the engine's prompt steps); both rates are measured (EWMA),
// and a block is restored while the first is smaller, or while either rate
// is still unmeasured. kvcache/host_tier.h explains why the per-block rule
// is the rule for a whole prefix.
#pragma once

namespace pagellm {

// Measured costs of restoring vs recomputing.
class RestoreCost {
 public:
  // A copy of `bytes` took `seconds`.
  void copied(double bytes, double seconds) { ewma(copy_rate_, bytes, seconds); }
  // A step computed `tokens` prompt tokens in `seconds`.
  void prefilled(double tokens, double seconds) { ewma(prefill_rate_, tokens, seconds); }
  double copy_rate() const { return copy_rate_; }
  double prefill_rate() const { return prefill_rate_; }
  // Whether restoring `bytes` at `copy_rate` beats computing `tokens`.
  bool restore_pays(double bytes, double tokens, double copy_rate) const {
    if (copy_rate <= 0 || prefill_rate_ <= 0) return true;
    return bytes / copy_rate < tokens / prefill_rate_;
  }

 private:
  static void ewma(double& rate, double amount, double seconds) {
    if (amount <= 0 || seconds <= 0) return;
    const double r = amount / seconds;
    rate = rate <= 0 ? r : 0.8 * rate + 0.2 * r;
  }
  double copy_rate_ = 0;     // bytes per second
  double prefill_rate_ = 0;  // tokens per second
};

}  // namespace pagellm
