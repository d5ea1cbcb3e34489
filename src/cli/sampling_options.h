// Sampling flags shared by generate, chat and bench (llama.cpp's names and
// defaults: --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

#include "engine/sampler.h"
#include "grammar/grammar.h"

namespace pagellm::cli {

struct SamplingOptions {
  SamplingParams params;
  bool seed_set = false;
  std::string grammar_file;      // --grammar FILE (GBNF)
  std::string json_schema_file;  // --json-schema FILE

  void add_to(CLI::App& sub);
  // The parameters, with a random seed unless --seed was given.
  SamplingParams resolve() const;
  // The output grammar from --grammar or --json-schema (null: neither).
  // Throws ConfigError naming the flag, the file and where it is wrong.
  std::shared_ptr<const Grammar> grammar() const;
};

// A grammar from a GBNF file or a JSON Schema file (at most one given; null
// for neither). Throws ConfigError naming the flag, the file and the error.
std::shared_ptr<const Grammar> load_grammar(const std::string& grammar_file,
                                            const std::string& json_schema_file);

}  // namespace pagellm::cli
