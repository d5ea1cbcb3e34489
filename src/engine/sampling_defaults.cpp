#include "engine/sampling_defaults.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "gguf/gguf_reader.h"
#include "util/error.h"

namespace pagellm {

namespace {

// The key's number when present and within [lo, hi] (hi_open: below hi);
// otherwise a warning and nothing. Files write these as float32, top_k as an
// integer; any numeric type is taken.
std::optional<double> model_number(const GgufFile& file, const char* key, double lo, double hi,
                                   bool lo_open, std::vector<std::string>& warnings) {
  std::optional<double> v;
  try {
    v = file.get_f64(key);
  } catch (const FormatError&) {
    warnings.push_back(fmt::format("{} is not a number: ignored", key));
    return std::nullopt;
  }
  if (!v) return std::nullopt;
  if (!std::isfinite(*v) || *v > hi || *v < lo || (lo_open && *v == lo)) {
    warnings.push_back(fmt::format("{} = {} is out of range ({}{}, {}]): ignored", key, *v,
                                   lo_open ? "(" : "[", lo, hi));
    return std::nullopt;
  }
  return v;
}

const char* source_name(DefaultSource s, const char* flag) {
  switch (s) {
    case DefaultSource::kFlag:
      return flag;
    case DefaultSource::kModel:
      return "model";
    case DefaultSource::kBuiltin:
      break;
  }
  return "default";
}

}  // namespace

ModelSampling read_model_sampling(const GgufFile& file) {
  ModelSampling m;
  auto& w = m.warnings;
  if (auto v = model_number(file, "general.sampling.temp", 0, 100, false, w)) m.temperature = *v;
  if (auto v = model_number(file, "general.sampling.top_p", 0, 1, true, w)) m.top_p = *v;
  if (auto v = model_number(file, "general.sampling.min_p", 0, 1, false, w)) m.min_p = *v;
  if (auto v = model_number(file, "general.sampling.penalty_repeat", 0, 100, true, w))
    m.repetition_penalty = *v;
  // llama.cpp reads top_k <= 0 as "off", as 0 is here.
  if (auto v = model_number(file, "general.sampling.top_k", -std::numeric_limits<double>::max(),
                            std::numeric_limits<int32_t>::max(), false, w))
    m.top_k = *v <= 0 ? 0 : static_cast<int32_t>(std::lround(*v));
  return m;
}

SamplingDefaults SamplingDefaults::openai() {
  SamplingDefaults d;
  d.params.temperature = 1.0f;
  d.params.top_k = 0;
  d.params.top_p = 1.0f;
  d.params.min_p = 0.0f;
  d.params.repetition_penalty = 1.0f;
  d.params.repeat_last_n = -1;
  return d;
}

SamplingDefaults SamplingDefaults::resolve(const SamplingParams& builtin,
                                           const SamplingParams& flags,
                                           const SamplingFields& given,
                                           const ModelSampling& model) {
  SamplingDefaults d;
  d.params = flags;  // the fields without a model key (repeat_last_n, ...) as the flags have them
  auto pick = [](auto& out, DefaultSource& src, bool flag_given, const auto& builtin_value,
                 const auto& model_value) {
    if (flag_given) {
      src = DefaultSource::kFlag;
    } else if (model_value) {
      out = *model_value;
      src = DefaultSource::kModel;
    } else {
      out = builtin_value;
    }
  };
  pick(d.params.temperature, d.source.temperature, given.temperature, builtin.temperature,
       model.temperature);
  pick(d.params.top_k, d.source.top_k, given.top_k, builtin.top_k, model.top_k);
  pick(d.params.top_p, d.source.top_p, given.top_p, builtin.top_p, model.top_p);
  pick(d.params.min_p, d.source.min_p, given.min_p, builtin.min_p, model.min_p);
  pick(d.params.repetition_penalty, d.source.repetition_penalty, given.repetition_penalty,
       builtin.repetition_penalty, model.repetition_penalty);
  d.has_seed = given.seed;
  if (!given.seed) d.params.seed = builtin.seed;
  return d;
}

SamplingParams SamplingDefaults::fill(SamplingParams r, const SamplingFields& given) const {
  if (!given.temperature) r.temperature = params.temperature;
  if (!given.top_k) r.top_k = params.top_k;
  if (!given.top_p) r.top_p = params.top_p;
  if (!given.min_p) r.min_p = params.min_p;
  if (!given.repetition_penalty) r.repetition_penalty = params.repetition_penalty;
  if (!given.seed && has_seed) r.seed = params.seed;
  return r;
}

std::string SamplingDefaults::describe() const {
  std::string s = fmt::format(
      "temp {} ({}), top_k {} ({}), top_p {} ({}), min_p {} ({}), repeat_penalty {} ({})",
      params.temperature, source_name(source.temperature, "--temp"), params.top_k,
      source_name(source.top_k, "--top-k"), params.top_p, source_name(source.top_p, "--top-p"),
      params.min_p, source_name(source.min_p, "--min-p"), params.repetition_penalty,
      source_name(source.repetition_penalty, "--repeat-penalty"));
  if (has_seed) s += fmt::format(", seed {} (--seed)", params.seed);
  return s;
}

bool SamplingDefaults::any_from_model() const {
  for (DefaultSource s : {source.temperature, source.top_k, source.top_p, source.min_p,
                          source.repetition_penalty})
    if (s == DefaultSource::kModel) return true;
  return false;
}

}  // namespace pagellm
