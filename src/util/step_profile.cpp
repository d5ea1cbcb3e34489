#include "util/step_profile.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <iterator>

namespace pagellm {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("PAGELLM_STEP_PROFILE");
    return v && std::strcmp(v, "1") == 0;
  }()};
  return on;
}

std::array<std::atomic<int64_t>, static_cast<size_t>(StepPhase::kCount)> g_counters{};

}  // namespace

const char* step_phase_name(StepPhase phase) {
  static constexpr const char* kNames[] = {"schedule",  "inputs", "forward", "matmul",     "attention",
                                           "mask_wait", "sample", "output",  "grammar_cpu"};
  static_assert(std::size(kNames) == static_cast<size_t>(StepPhase::kCount));
  return kNames[static_cast<size_t>(phase)];
}

bool step_profile_enabled() { return enabled_flag().load(std::memory_order_relaxed); }

void enable_step_profile(bool on) { enabled_flag().store(on, std::memory_order_relaxed); }

void step_profile_add(StepPhase phase, int64_t ns) {
  g_counters[static_cast<size_t>(phase)].fetch_add(ns, std::memory_order_relaxed);
}

int64_t step_profile_counter(StepPhase phase) {
  return g_counters[static_cast<size_t>(phase)].load(std::memory_order_relaxed);
}

void StepTimer::begin() {
  on_ = step_profile_enabled();
  if (!on_) return;
  step_ = {};
  matmul_ = step_profile_counter(StepPhase::kMatmul);
  attention_ = step_profile_counter(StepPhase::kAttention);
  grammar_ = step_profile_counter(StepPhase::kGrammarCpu);
  start_ = mark_ = step_profile_now_ns();
}

void StepTimer::lap(StepPhase phase) {
  if (!on_) return;
  const int64_t now = step_profile_now_ns();
  step_[phase] += now - mark_;
  mark_ = now;
}

void StepTimer::skip() {
  if (on_) mark_ = step_profile_now_ns();
}

void StepTimer::end(bool decode_step, uint64_t sequences, StepProfileTotals& totals) {
  if (!on_ || !decode_step) return;
  step_[StepPhase::kMatmul] = step_profile_counter(StepPhase::kMatmul) - matmul_;
  step_[StepPhase::kAttention] = step_profile_counter(StepPhase::kAttention) - attention_;
  step_[StepPhase::kGrammarCpu] = step_profile_counter(StepPhase::kGrammarCpu) - grammar_;
  totals.steps += 1;
  totals.sequences += sequences;
  for (size_t i = 0; i < totals.ns.size(); ++i) totals.ns[i] += step_.ns[i];
  totals.total_ns += step_profile_now_ns() - start_;
}

std::string StepProfileTotals::table() const {
  if (steps == 0) return "no decode steps\n";
  const double n = static_cast<double>(steps);
  const double total = static_cast<double>(total_ns);
  auto line = [&](const char* name, int64_t ns) {
    return fmt::format("  {:<34} {:9.1f} us {:6.1f}%\n", name, static_cast<double>(ns) / n / 1e3,
                       total > 0 ? 100.0 * static_cast<double>(ns) / total : 0.0);
  };
  const auto& t = *this;
  const int64_t forward_other = t[StepPhase::kForward] - t[StepPhase::kMatmul] -
                                t[StepPhase::kAttention];
  int64_t named = 0;
  for (StepPhase p : {StepPhase::kSchedule, StepPhase::kInputs, StepPhase::kForward,
                      StepPhase::kMaskWait, StepPhase::kSample, StepPhase::kOutput})
    named += t[p];
  std::string s = fmt::format("step profile: {} decode steps, {:.1f} sequences per step, {:.1f} us per step\n",
                              steps, static_cast<double>(sequences) / n, total / n / 1e3);
  s += line("scheduling", t[StepPhase::kSchedule]);
  s += line("input prep", t[StepPhase::kInputs]);
  s += line("forward pass", t[StepPhase::kForward]);
  s += line("  matmuls", t[StepPhase::kMatmul]);
  s += line("  attention", t[StepPhase::kAttention]);
  s += line("  other (norms, rope, KV writes...)", forward_other);
  s += line("grammar mask wait", t[StepPhase::kMaskWait]);
  s += line("sampling", t[StepPhase::kSample]);
  s += line("output handling", t[StepPhase::kOutput]);
  s += line("unaccounted", t.total_ns - named);
  s += line("grammar masks (on any thread)", t[StepPhase::kGrammarCpu]);
  return s;
}

}  // namespace pagellm
