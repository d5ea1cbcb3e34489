// Opt-in time split of the engine's decode steps (PAGELLM_STEP_PROFILE=1 or
// `pagellm bench --profile`): the engine times its phases on its own thread
// (wall clock), the CPU backend adds the time of its matmuls and attention
// to process-wide counters that the engine reads around each forward pass,
// and the grammar masks add the time they take on whatever thread runs them
// (wall time there: a loaded machine's preemptions count). Off, each probe is one relaxed load of a flag. The counters are
// process-wide: two engines stepping at once in one process mix theirs.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace pagellm {

enum class StepPhase : uint8_t {
  kSchedule,     // scheduling (and drafts proposed)
  kInputs,       // the batch built from the scheduled sequences
  kForward,      // the forward pass (copy-on-write copies included), of which:
  kMatmul,       //   the backend's matmuls (CPU backend)
  kAttention,    //   the backend's attention (CPU backend)
  kMaskWait,     // waiting for the grammar masks computed during the forward pass
  kSample,       // drawing the tokens (masks not yet computed are computed here)
  kOutput,       // tokens emitted: text, stop strings, events, finished requests
  kGrammarCpu,   // grammar masks: their time on whatever thread ran them (overlaps the others)
  kCount
};

// A short name ("schedule", "matmul", ...) for reports.
const char* step_phase_name(StepPhase phase);

bool step_profile_enabled();
// For `bench --profile` (the env var turns it on too); false: off again.
void enable_step_profile(bool on = true);

// Process-wide counters (nanoseconds) the backend and the grammar add to.
void step_profile_add(StepPhase phase, int64_t ns);
int64_t step_profile_counter(StepPhase phase);

inline int64_t step_profile_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Adds the time from construction to destruction to `phase`'s counter
// (nothing when the profile is off).
class StepProfileScope {
 public:
  explicit StepProfileScope(StepPhase phase)
      : phase_(phase), start_(step_profile_enabled() ? step_profile_now_ns() : -1) {}
  ~StepProfileScope() {
    if (start_ >= 0) step_profile_add(phase_, step_profile_now_ns() - start_);
  }
  StepProfileScope(const StepProfileScope&) = delete;
  StepProfileScope& operator=(const StepProfileScope&) = delete;

 private:
  StepPhase phase_;
  int64_t start_;
};

// One engine's totals over its decode steps (every scheduled sequence
// decoding: no prompt positions in the batch).
struct StepProfileTotals {
  uint64_t steps = 0;
  uint64_t sequences = 0;  // summed over the steps (sequences per step: / steps)
  std::array<int64_t, static_cast<size_t>(StepPhase::kCount)> ns{};
  int64_t total_ns = 0;  // the steps' wall time, end to end

  int64_t& operator[](StepPhase p) { return ns[static_cast<size_t>(p)]; }
  int64_t operator[](StepPhase p) const { return ns[static_cast<size_t>(p)]; }
  // A table: per phase, microseconds per step and share of the step.
  std::string table() const;
};

// Times one step's phases on the engine thread: begin(), then lap(phase) at
// the end of each phase (skip() for time left unnamed), end() to add the
// step to `totals` if it was a decode step. Inert while the profile is off.
class StepTimer {
 public:
  void begin();
  void lap(StepPhase phase);
  void skip();
  void end(bool decode_step, uint64_t sequences, StepProfileTotals& totals);

 private:
  bool on_ = false;
  int64_t start_ = 0, mark_ = 0;
  StepProfileTotals step_;
  int64_t matmul_ = 0, attention_ = 0, grammar_ = 0;  // the counters at begin()
};

}  // namespace pagellm
