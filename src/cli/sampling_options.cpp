#include "cli/sampling_options.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <cstdio>
#include <random>

#include "cli/cli_checks.h"
#include "grammar/json_schema.h"
#include "util/read_file.h"

namespace pagellm::cli {

void SamplingOptions::add_sampler_flags(CLI::App& sub, const char* temp_help,
                                        const char* model_hint) {
  auto help = [&](const char* what, const char* key) {
    return fmt::format("{} (default: the model's general.sampling.{} {}, else this)", what, key,
                       model_hint);
  };
  temp_opt = sub.add_option("--temp", params.temperature, help(temp_help, "temp"))
                 ->check(at_least(0))
                 ->capture_default_str();
  top_k_opt = sub.add_option("--top-k", params.top_k, help("Top-k (0 = off)", "top_k"))
                  ->check(at_least(0))
                  ->capture_default_str();
  top_p_opt = sub.add_option("--top-p", params.top_p, help("Top-p (1 = off)", "top_p"))
                  ->check(in_range(0.0, 1.0))
                  ->capture_default_str();
  min_p_opt = sub.add_option("--min-p", params.min_p, help("Min-p (0 = off)", "min_p"))
                  ->check(in_range(0.0, 1.0))
                  ->capture_default_str();
  repeat_penalty_opt =
      sub.add_option("--repeat-penalty", params.repetition_penalty,
                     help("Repetition penalty (1 = off)", "penalty_repeat"))
          ->check(above(0))
          ->capture_default_str();
}

void SamplingOptions::add_to(CLI::App& sub) {
  builtin = params;
  add_sampler_flags(sub, "Temperature (0 = greedy)", "if set");
  sub.add_option("--repeat-last-n", params.repeat_last_n,
                 "Tokens the repetition penalty looks at (-1 = all)")
      ->check(at_least(-1))
      ->capture_default_str();
  seed_opt = sub.add_option("--seed", params.seed, "Random seed (default: random)");
  auto* g = sub.add_option("--grammar", grammar_file,
                           "Constrain the output to a GBNF grammar (llama.cpp's syntax) in FILE");
  sub.add_option("--json-schema", json_schema_file,
                 "Constrain the output to JSON valid under the JSON Schema in FILE")
      ->excludes(g);
}

void SamplingOptions::add_server_defaults_to(CLI::App& sub) {
  params = builtin = SamplingDefaults::openai().params;
  add_sampler_flags(sub, "Temperature for requests that do not set one (0 = greedy)",
                    "if set; OpenAI's");
  seed_opt = sub.add_option("--seed", params.seed,
                            "Seed for requests that do not set one (default: a random seed per "
                            "request)");
}

SamplingFields SamplingOptions::given() const {
  auto set = [](const CLI::Option* o) { return o && o->count() > 0; };
  SamplingFields g;
  g.temperature = set(temp_opt);
  g.top_k = set(top_k_opt);
  g.top_p = set(top_p_opt);
  g.min_p = set(min_p_opt);
  g.repetition_penalty = set(repeat_penalty_opt);
  g.seed = set(seed_opt);
  return g;
}

SamplingDefaults SamplingOptions::defaults(const GgufFile& file) const {
  const ModelSampling model = read_model_sampling(file);
  for (const std::string& w : model.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return SamplingDefaults::resolve(builtin, params, given(), model);
}

std::shared_ptr<const Grammar> SamplingOptions::grammar() const {
  return load_grammar(grammar_file, json_schema_file);
}

std::shared_ptr<const Grammar> load_grammar(const std::string& grammar_file,
                                            const std::string& json_schema_file) {
  if (!grammar_file.empty()) {
    try {
      return Grammar::parse(read_whole_file(grammar_file));
    } catch (const GrammarError& e) {
      throw ConfigError(fmt::format("--grammar {}: {}", grammar_file, e.what()));
    }
  }
  if (json_schema_file.empty()) return nullptr;
  const std::string text = read_whole_file(json_schema_file);
  nlohmann::ordered_json schema;  // properties keep the file's order
  try {
    schema = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("--json-schema {}: not valid JSON: {}", json_schema_file, e.what()));
  }
  try {
    return Grammar::parse(json_schema_to_gbnf(schema));
  } catch (const Error& e) {
    throw ConfigError(fmt::format("--json-schema {}: {}", json_schema_file, e.what()));
  }
}

SamplingParams SamplingOptions::resolve(const GgufFile& file) const {
  const SamplingDefaults d = defaults(file);
  if (d.any_from_model())
    std::fprintf(stderr, "sampling: %s\n", d.describe().c_str());
  SamplingParams p = d.params;
  if (!d.has_seed) p.seed = std::random_device{}();
  return p;
}

}  // namespace pagellm::cli
