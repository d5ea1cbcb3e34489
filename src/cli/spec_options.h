// Speculative decoding flags shared by generate, chat, bench and serve:
// --spec-ngram N (prompt lookup), --draft-model PATH, --draft-max K.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/engine_setup.h"
#include "cli/plan_options.h"
#include "engine/engine.h"

namespace pagellm::cli {

struct SpeculationOptions {
  int32_t ngram = 0;        // 0: off
  std::string draft_model;  // empty: none
  int32_t draft_max = 4;

  void add_to(CLI::App& sub);
  bool enabled() const { return (ngram > 0 || !draft_model.empty()) && draft_max > 0; }
  // Into the plan (the workspace's logit rows for drafts).
  void apply(PlanOptions& plan) const;
  // The engine's (RunOptions::speculation).
  SpeculationConfig config() const;
  // With --draft-model: plans the draft model and its KV cache (after the
  // model is loaded, so the plan sees what memory is left), checks that it
  // shares the model's vocabulary, and gives `engine` its proposer. Throws
  // ConfigError / PlanError / FormatError naming the draft model.
  void attach(Engine& engine, const EngineSetup& setup, bool log) const;
};

}  // namespace pagellm::cli
