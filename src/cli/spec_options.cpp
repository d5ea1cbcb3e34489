#include "cli/spec_options.h"

#include "cli/cli_checks.h"

namespace pagellm::cli {

void SpeculationOptions::add_to(CLI::App& sub) {
  sub.add_option("--spec-ngram", ngram,
                 "Speculative decoding by prompt lookup: draft what followed the last N tokens "
                 "where they occurred earlier (0: off; the output is the same either way)")
      ->capture_default_str()
      ->check(at_least(0));
  sub.add_option("--draft-model", draft_model,
                 "Speculative decoding with a smaller GGUF model of the same vocabulary as the "
                 "drafter");
  sub.add_option("--draft-max", draft_max, "Most tokens drafted per sequence and step")
      ->capture_default_str()
      ->check(at_least(1));
}

namespace {
SpeculationConfig to_config(const SpeculationOptions& o) {
  SpeculationConfig c;
  c.ngram = o.draft_model.empty() ? o.ngram : 0;
  c.draft_model = !o.draft_model.empty();
  c.draft_max = o.draft_max;
  return c;
}
}  // namespace

void SpeculationOptions::apply(PlanOptions& plan) const { plan.draft_rows = to_config(*this).draft_rows(); }

void SpeculationOptions::apply(EngineConfig& config) const { config.speculation = to_config(*this); }

}  // namespace pagellm::cli
