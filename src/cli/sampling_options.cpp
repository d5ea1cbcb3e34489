#include "cli/sampling_options.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <random>

#include "cli/cli_checks.h"
#include "grammar/json_schema.h"
#include "util/read_file.h"

namespace pagellm::cli {

void SamplingOptions::add_to(CLI::App& sub) {
  sub.add_option("--temp", params.temperature, "Temperature (0 = greedy)")
      ->check(at_least(0));
  sub.add_option("--top-k", params.top_k, "Top-k (0 = off)")->check(at_least(0));
  sub.add_option("--top-p", params.top_p, "Top-p (1 = off)")->check(in_range(0.0, 1.0));
  sub.add_option("--min-p", params.min_p, "Min-p (0 = off)")->check(in_range(0.0, 1.0));
  sub.add_option("--repeat-penalty", params.repetition_penalty, "Repetition penalty (1 = off)")
      ->check(above(0))
      ->capture_default_str();
  sub.add_option("--repeat-last-n", params.repeat_last_n,
                 "Tokens the repetition penalty looks at (-1 = all)")
      ->check(at_least(-1))
      ->capture_default_str();
  sub.add_option_function<uint64_t>(
      "--seed",
      [this](const uint64_t& s) {
        params.seed = s;
        seed_set = true;
      },
      "Random seed (default: random)");
  auto* g = sub.add_option("--grammar", grammar_file,
                           "Constrain the output to a GBNF grammar (llama.cpp's syntax) in FILE");
  sub.add_option("--json-schema", json_schema_file,
                 "Constrain the output to JSON valid under the JSON Schema in FILE")
      ->excludes(g);
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

SamplingParams SamplingOptions::resolve() const {
  SamplingParams p = params;
  if (!seed_set) p.seed = std::random_device{}();
  return p;
}

}  // namespace pagellm::cli
