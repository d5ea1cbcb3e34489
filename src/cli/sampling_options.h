// Sampling flags shared by generate, chat and bench (llama.cpp's names and
// defaults: --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

#include "engine/sampler.h"

namespace pagellm::cli {

struct SamplingOptions {
  SamplingParams params;
  bool seed_set = false;

  void add_to(CLI::App& sub);
  // The parameters, with a random seed unless --seed was given.
  SamplingParams resolve() const;
};

}  // namespace pagellm::cli
