// Sampling flags: generate and chat (llama.cpp's names and defaults: --temp
// 0.8 --top-k 40 --top-p 0.95 --min-p 0.05) and serve (the defaults for
// requests that leave a field out; OpenAI's: temperature 1, top_p 1). A flag
// given wins over the model's general.sampling.* keys, which win over the
// built-in default (engine/sampling_defaults.h).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

#include "engine/sampler.h"
#include "engine/sampling_defaults.h"
#include "grammar/grammar.h"

namespace pagellm {
class GgufFile;
}

namespace pagellm::cli {

struct SamplingOptions {
  SamplingParams params;         // the flags' values (the built-in defaults until given)
  SamplingParams builtin;        // the built-in defaults
  std::string grammar_file;      // --grammar FILE (GBNF)
  std::string json_schema_file;  // --json-schema FILE
  // The sampler flags, to tell which were given.
  CLI::Option *temp_opt = nullptr, *top_k_opt = nullptr, *top_p_opt = nullptr,
              *min_p_opt = nullptr, *repeat_penalty_opt = nullptr, *seed_opt = nullptr;

  // generate and chat: the sampler flags, --repeat-last-n, --grammar, --json-schema.
  void add_to(CLI::App& sub);
  // serve: the sampler flags only, as defaults for requests (OpenAI's built in).
  void add_server_defaults_to(CLI::App& sub);

  SamplingFields given() const;
  // The defaults in force with the model in `file`: flags, then its keys,
  // then the built-in ones. Prints the keys it ignores as warnings on stderr.
  SamplingDefaults defaults(const GgufFile& file) const;
  // generate and chat: the parameters, with a random seed unless --seed was
  // given; a line on stderr says which values came from the model.
  SamplingParams resolve(const GgufFile& file) const;
  // The output grammar from --grammar or --json-schema (null: neither).
  // Throws ConfigError naming the flag, the file and where it is wrong.
  std::shared_ptr<const Grammar> grammar() const;

 private:
  void add_sampler_flags(CLI::App& sub, const char* temp_help, const char* default_hint);
};

// A grammar from a GBNF file or a JSON Schema file (at most one given; null
// for neither). Throws ConfigError naming the flag, the file and the error.
std::shared_ptr<const Grammar> load_grammar(const std::string& grammar_file,
                                            const std::string& json_schema_file);

}  // namespace pagellm::cli
