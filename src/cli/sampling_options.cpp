#include "cli/sampling_options.h"

#include <random>

#include "cli/cli_checks.h"

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
}

SamplingParams SamplingOptions::resolve() const {
  SamplingParams p = params;
  if (!seed_set) p.seed = std::random_device{}();
  return p;
}

}  // namespace pagellm::cli
