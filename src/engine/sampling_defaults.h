// Sampler defaults and where each one came from. A request (or a command)
// that leaves a sampler field out gets the default, chosen in this order:
// a command-line flag (`--temp 0.7`), else the model's own recommendation
// (llama.cpp's GGUF keys general.sampling.temp / top_k / top_p / min_p /
// penalty_repeat), else the command's built-in default (llama.cpp's for
// generate and chat, OpenAI's for serve).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace pagellm {

class GgufFile;

// Which sampler fields a caller set itself (a request's body, a command's flags).
struct SamplingFields {
  bool temperature = false;
  bool top_k = false;
  bool top_p = false;
  bool min_p = false;
  bool repetition_penalty = false;
  bool seed = false;
};

// The model's general.sampling.* values that pagellm's sampler has (absent:
// the key is not in the file, or its value is unusable: see `warnings`).
struct ModelSampling {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  // One line per key present but ignored (wrong type, out of range).
  std::vector<std::string> warnings;
};
ModelSampling read_model_sampling(const GgufFile& file);

enum class DefaultSource : uint8_t { kBuiltin, kModel, kFlag };

struct SamplingDefaults {
  SamplingParams params;
  bool has_seed = false;  // false: each request draws a random seed
  struct Sources {
    DefaultSource temperature = DefaultSource::kBuiltin, top_k = DefaultSource::kBuiltin,
                  top_p = DefaultSource::kBuiltin, min_p = DefaultSource::kBuiltin,
                  repetition_penalty = DefaultSource::kBuiltin;
  } source;

  // OpenAI's: temperature 1, top_p 1, no top_k, min_p or repetition penalty
  // (which, when a request sets one, looks at the whole history).
  static SamplingDefaults openai();

  // Precedence: `flags` where `given` says so, else the model's value, else
  // `builtin`; the fields the model has no key for are taken from `flags`.
  static SamplingDefaults resolve(const SamplingParams& builtin, const SamplingParams& flags,
                                  const SamplingFields& given, const ModelSampling& model);

  // `request` with every field it did not give (`given`) taken from these defaults.
  SamplingParams fill(SamplingParams request, const SamplingFields& given) const;

  // "temp 0.6 (model), top_k 20 (--top-k), top_p 0.95 (model), min_p 0 (default),
  // repeat_penalty 1 (default)", and ", seed 7 (--seed)" with a seed.
  std::string describe() const;
  // Whether any default came from the model.
  bool any_from_model() const;
};

}  // namespace pagellm
