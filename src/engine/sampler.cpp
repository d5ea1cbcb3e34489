#include "engine/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/exp_negated.h"
#include "util/error.h"

namespace pagellm {

void SamplingParams::validate() const {
  // Written so that NaN fails every check.
  if (!(temperature >= 0.0f) || std::isinf(temperature)) {
    throw ConfigError(fmt::format("temperature must be >= 0 (got {})", temperature));
  }
  if (top_k < 0) throw ConfigError(fmt::format("top_k must be >= 0 (got {})", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    throw ConfigError(fmt::format("top_p must be in (0, 1] (got {})", top_p));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    throw ConfigError(fmt::format("min_p must be in [0, 1] (got {})", min_p));
  }
  if (!(repetition_penalty > 0.0f) || std::isinf(repetition_penalty)) {
    throw ConfigError(fmt::format("repetition_penalty must be > 0 (got {})", repetition_penalty));
  }
  if (repeat_last_n < -1) {
    throw ConfigError(fmt::format("repeat_last_n must be >= -1 (got {})", repeat_last_n));
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    throw ConfigError(
        fmt::format("presence_penalty must be in [-2, 2] (got {})", presence_penalty));
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    throw ConfigError(
        fmt::format("frequency_penalty must be in [-2, 2] (got {})", frequency_penalty));
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) throw ConfigError(fmt::format("logit_bias token id must be >= 0 (got {})", id));
    if (!(bias >= -100.0f && bias <= 100.0f))
      throw ConfigError(fmt::format("logit_bias must be in [-100, 100] (got {} for token {})", bias, id));
  }
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The candidates' order: the higher value first, the lower id on ties.
bool ranks_before(double va, int32_t a, double vb, int32_t b) {
  return va > vb || (va == vb && a < b);
}

}  // namespace

int32_t first_argmax(const float* x, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Lane maxima first (independent chains the compiler can vectorise; NaN
  // never compares greater), then the first index holding the maximum.
  constexpr int kLanes = 8;
  float lane[kLanes];
  std::fill(lane, lane + kLanes, kNegInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
  float best = kNegInf;
  for (float v : lane) best = v > best ? v : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  if (best == kNegInf) return 0;
  for (int64_t j = 0; j < n; ++j)
    if (x[j] == best) return static_cast<int32_t>(j);
  return 0;  // not reached
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  params_.validate();
}

double Sampler::next_uniform() {
  ++draws_;
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::discard(uint64_t n) {
  rng_.discard(n);
  draws_ += n;
}

int32_t Sampler::sample(const float* logits, int n_vocab, std::span<const int32_t> history,
                        size_t n_prompt) {
  if (logits == nullptr || n_vocab <= 0) {
    throw Error(fmt::format("sampler: no logits (n_vocab {})", n_vocab));
  }
  const double u = next_uniform();  // exactly one draw per call, whatever the mode
  n_vocab_ = n_vocab;
  // Without penalties the float logits are read in place (penalized_ is
  // filled if logprobs() asks); with them, from penalized_.
  const bool plain = !penalizes();
  unpenalized_ = plain ? logits : nullptr;
  if (!plain) {
    copy_logits(logits, n_vocab);
    if (params_.repetition_penalty != 1.0f && params_.repeat_last_n != 0 && !history.empty()) {
      size_t window = history.size();
      if (params_.repeat_last_n > 0) {
        window = std::min(window, static_cast<size_t>(params_.repeat_last_n));
      }
      const auto recent = history.subspan(history.size() - window);
      std::vector<int32_t> distinct(recent.begin(), recent.end());
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      const float penalty = params_.repetition_penalty;
      for (int32_t id : distinct) {
        if (id < 0 || id >= n_vocab) {
          throw Error(
              fmt::format("sampler: history token {} out of range (n_vocab {})", id, n_vocab));
        }
        if (std::isnan(logits[id])) continue;
        const float l = logits[id];
        penalized_[id] = static_cast<double>(l > 0.0f ? l / penalty : l * penalty);
      }
    }

    if ((params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) &&
        n_prompt < history.size()) {
      std::vector<int32_t> generated(history.begin() + static_cast<std::ptrdiff_t>(n_prompt),
                                     history.end());
      std::sort(generated.begin(), generated.end());
      for (size_t i = 0; i < generated.size();) {
        const int32_t id = generated[i];
        size_t j = i;
        while (j < generated.size() && generated[j] == id) ++j;
        if (id < 0 || id >= n_vocab) {
          throw Error(
              fmt::format("sampler: history token {} out of range (n_vocab {})", id, n_vocab));
        }
        const double count = static_cast<double>(j - i);
        penalized_[id] -= static_cast<double>(params_.presence_penalty) +
                          count * static_cast<double>(params_.frequency_penalty);
        i = j;
      }
    }
    for (const auto& [id, bias] : params_.logit_bias) {
      if (id < 0 || id >= n_vocab)
        throw Error(fmt::format("sampler: logit_bias token {} out of range (n_vocab {})", id, n_vocab));
      penalized_[static_cast<size_t>(id)] += static_cast<double>(bias);  // -inf stays -inf
    }
  }
  auto logit = [&](int i) -> float {
    return std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
  };
  auto penalized = [&](int i) { return penalized_[static_cast<size_t>(i)]; };
  auto value = [&](int i) -> double { return plain ? logit(i) : penalized(i); };

  if (params_.temperature == 0.0f) {
    if (plain) return first_argmax(logits, n_vocab);
    int32_t best = 0;
    for (int i = 1; i < n_vocab; ++i)
      if (penalized_[i] > penalized_[best]) best = i;
    return best;
  }

  // The candidates, best first (higher logit, then lower id).
  auto before = [](const Candidate& a, const Candidate& b) {
    return ranks_before(a.logit, a.id, b.logit, b.id);
  };
  const int32_t k = params_.top_k;
  cands_.clear();
  if (k > 0 && k < n_vocab) {
    // The k best in one pass: a heap whose front is the worst kept. Ids come
    // in increasing order, so a later id only displaces it with a strictly
    // larger logit (the same k as sorting them all).
    int i = 0;
    for (; i < k; ++i) {
      cands_.push_back({i, value(i)});
      std::push_heap(cands_.begin(), cands_.end(), before);
    }
    auto displace = [&](int id, double l) {
      std::pop_heap(cands_.begin(), cands_.end(), before);
      cands_.back() = {id, l};
      std::push_heap(cands_.begin(), cands_.end(), before);
    };
    if (plain) {
      // On the floats: the worst kept is a float (or -inf) exactly, and NaN
      // never compares greater.
      float worst = static_cast<float>(cands_.front().logit);
      for (; i < n_vocab; ++i)
        if (logits[i] > worst) {
          displace(i, logits[i]);
          worst = static_cast<float>(cands_.front().logit);
        }
    } else {
      for (; i < n_vocab; ++i)
        if (penalized_[i] > cands_.front().logit) displace(i, penalized_[i]);
    }
    std::sort_heap(cands_.begin(), cands_.end(), before);
  } else {
    if (plain) return draw_all(logit, n_vocab, logit(first_argmax(logits, n_vocab)), u);
    return draw_all(penalized, n_vocab, *std::max_element(penalized_.begin(), penalized_.end()), u);
  }
  if (cands_.front().logit == -kInf) return cands_.front().id;  // nothing possible: id 0
  return pick(cands_, u);
}

template <class ValueOf>
int32_t Sampler::draw_all(const ValueOf& value_of, int n_vocab, double max, double u) {
  // value_of(id): the token's value (a float or a double), not NaN; `max`
  // the largest.
  // Buckets of width 1/64 in x = (max - value) / temperature, the last one
  // open (probabilities below e^-32 of the best): each bucket's tokens come
  // before the next bucket's in the order, as the probability falls with
  // the value. Walks go bucket by bucket on the summed masses and enter (sort)
  // only the bucket where a cut or the draw falls.
  constexpr int kBuckets = 2048;
  constexpr double kPerUnit = 64.0;
  const size_t n = static_cast<size_t>(n_vocab);
  if (max == -kInf) return 0;  // nothing possible: the lowest id, as greedy
  if (max == kInf) {           // infinitely likely: the first such token
    for (int i = 0; i < n_vocab; ++i)
      if (value_of(i) == max) return i;
  }

  const double temp = params_.temperature;
  prob_.resize(n);
  bucket_of_.resize(n);
  for (size_t i = 0; i < n; ++i)
    prob_[i] = (max - static_cast<double>(value_of(static_cast<int>(i)))) / temp;
  for (size_t i = 0; i < n; ++i) {
    const double x = prob_[i];
    bucket_of_[i] = static_cast<uint16_t>(
        x < (kBuckets - 1) / kPerUnit ? static_cast<int>(x * kPerUnit) : kBuckets - 1);
  }
  exp_negated(prob_.data(), prob_.data(), n);  // p = exp(-x); a std::exp per token was
                                               // most of the draw
  bucket_count_.assign(kBuckets, 0);
  bucket_mass_.assign(kBuckets, 0.0);
  const double min_p = params_.min_p;  // x the best one's probability, exp(0) = 1
  // Two sets of sums, even and odd tokens, so neighbours in one bucket do not
  // wait on each other's additions; folded in a fixed order.
  bucket_mass_odd_.assign(kBuckets, 0.0);
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    ++bucket_count_[bucket_of_[i]];
    ++bucket_count_[bucket_of_[i + 1]];
    bucket_mass_[bucket_of_[i]] += prob_[i];
    bucket_mass_odd_[bucket_of_[i + 1]] += prob_[i + 1];
  }
  if (i < n) {
    ++bucket_count_[bucket_of_[i]];
    bucket_mass_[bucket_of_[i]] += prob_[i];
  }
  for (int b = 0; b < kBuckets; ++b) bucket_mass_[b] += bucket_mass_odd_[b];
  size_t n_min_p = 0;
  if (min_p > 0.0)
    for (size_t j = 0; j < n; ++j) n_min_p += prob_[j] >= min_p;
  // The tokens of bucket b in the order (value descending, lower id first),
  // gathered when a walk enters it; the last one gathered is kept.
  int gathered = -1;
  auto members = [&](int b) -> const std::vector<int32_t>& {
    if (gathered != b) {
      gathered = b;
      members_.clear();
      // 16 tokens at a time through a test the compiler vectorises: a
      // bucket's tokens are few and far between.
      const uint16_t* of = bucket_of_.data();
      size_t i = 0;
      for (; i + 16 <= n; i += 16) {
        bool any = false;
        for (size_t j = 0; j < 16; ++j) any |= of[i + j] == b;
        if (any)
          for (size_t j = i; j < i + 16; ++j)
            if (of[j] == b) members_.push_back(static_cast<int32_t>(j));
      }
      for (; i < n; ++i)
        if (of[i] == b) members_.push_back(static_cast<int32_t>(i));
      std::sort(members_.begin(), members_.end(),
                [&](int32_t a, int32_t c) { return ranks_before(value_of(a), a, value_of(c), c); });
    }
    return members_;
  };
  double total = 0.0;
  for (double m : bucket_mass_) total += m;

  // The kept prefix: every token of the buckets before `last`, and the first
  // `in_last` of bucket `last`.
  int last = kBuckets - 1;
  while (bucket_count_[last] == 0) --last;
  size_t in_last = bucket_count_[last];
  auto cut_at = [&](int b, size_t in_b) {
    if (b < last || (b == last && in_b < in_last)) last = b, in_last = in_b;
  };
  // top_p: the shortest prefix whose mass reaches top_p x total.
  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    double cum = 0.0;
    for (int b = 0; b < kBuckets; ++b) {
      if (cum + bucket_mass_[b] < target) {
        cum += bucket_mass_[b];
        continue;
      }
      const std::vector<int32_t>& m = members(b);
      size_t j = 0;
      while (j < m.size() && (cum += prob_[static_cast<size_t>(m[j])]) < target) ++j;
      cut_at(b, std::min(j + 1, m.size()));  // the whole bucket where rounding falls short
      break;
    }
  }
  // min_p: those with probability >= min_p x the best's, a prefix that keeps
  // the best at least.
  if (min_p > 0.0) {
    size_t before = 0, pos = std::max<size_t>(n_min_p, 1) - 1;
    int b = 0;
    while (before + bucket_count_[b] <= pos) before += bucket_count_[b++];
    cut_at(b, pos - before + 1);
  }

  double last_mass = bucket_mass_[last];
  if (in_last < bucket_count_[last]) {
    const std::vector<int32_t>& m = members(last);
    last_mass = 0.0;
    for (size_t j = 0; j < in_last; ++j) last_mass += prob_[static_cast<size_t>(m[j])];
  }
  double kept = 0.0;
  for (int b = 0; b < last; ++b) kept += bucket_mass_[b];
  kept += last_mass;

  // The first token whose cumulative probability exceeds u x kept.
  const double target = u * kept;
  double cum = 0.0;
  for (int b = 0; b <= last; ++b) {
    const double mass = b == last ? last_mass : bucket_mass_[b];
    if (cum + mass <= target) {
      cum += mass;
      continue;
    }
    const std::vector<int32_t>& m = members(b);
    const size_t end = b == last ? in_last : m.size();
    for (size_t j = 0; j < end; ++j)
      if ((cum += prob_[static_cast<size_t>(m[j])]) > target) return m[j];
    // Rounding left this bucket's walk short: on into the next, as the full
    // walk would go.
  }
  // Only reached when rounding keeps the walk below u x kept: the last kept
  // token with a positive probability, where the full walk ends.
  for (int b = last; b >= 0; --b) {
    if (!(bucket_mass_[b] > 0.0)) continue;
    const std::vector<int32_t>& m = members(b);
    for (size_t j = b == last ? in_last : m.size(); j-- > 0;)
      if (prob_[static_cast<size_t>(m[j])] > 0.0) return m[j];
  }
  return 0;  // not reached: the best token's probability is 1
}

bool Sampler::penalizes() const {
  return (params_.repetition_penalty != 1.0f && params_.repeat_last_n != 0) ||
         params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f ||
         !params_.logit_bias.empty();
}

void Sampler::copy_logits(const float* logits, int n_vocab) const {
  penalized_.resize(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i)
    penalized_[i] = std::isnan(logits[i]) ? -kInf : static_cast<double>(logits[i]);
}

TokenLogprob Sampler::logprobs(int32_t token, int32_t top_n, std::vector<TokenLogprob>* top) const {
  if (unpenalized_) {
    copy_logits(unpenalized_, n_vocab_);
    unpenalized_ = nullptr;
  }
  const int n_vocab = static_cast<int>(penalized_.size());
  if (n_vocab == 0 || token < 0 || token >= n_vocab) {
    throw Error(fmt::format("sampler: logprobs of token {} (n_vocab {})", token, n_vocab));
  }
  const double max = *std::max_element(penalized_.begin(), penalized_.end());
  double lse = max;  // log(sum(exp(l))), computed around the max
  if (max == kInf) {
    lse = std::numeric_limits<double>::quiet_NaN();  // +inf logits: no distribution
  } else if (max != -kInf) {
    // exp(l - max) as exp(-(max - l)), vectorised (prob_ is scratch here).
    prob_.resize(penalized_.size());
    for (size_t i = 0; i < penalized_.size(); ++i) prob_[i] = max - penalized_[i];
    exp_negated(prob_.data(), prob_.data(), prob_.size());
    double sum = 0.0;
    for (double p : prob_) sum += p;
    lse = max + std::log(sum);
  }
  auto logprob = [&](int32_t id) -> float {
    const double l = penalized_[static_cast<size_t>(id)];
    if (l == -kInf || max == -kInf) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(l - lse);
  };
  if (top != nullptr) {
    top->clear();
    const int32_t k = std::clamp(top_n, 0, n_vocab);
    if (k > 0) {
      std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
      for (int32_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = i;
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return ranks_before(penalized_[static_cast<size_t>(a)], a,
                            penalized_[static_cast<size_t>(b)], b);
      });
      for (int32_t i = 0; i < k; ++i) {
        const int32_t id = ids[static_cast<size_t>(i)];
        top->push_back({id, logprob(id)});
      }
    }
  }
  return {token, logprob(token)};
}

// `cands` is sorted best first; their logits become probabilities in place.
int32_t Sampler::pick(std::vector<Candidate>& cands, double u) const {
  const double max = cands.front().logit;
  const double temp = params_.temperature;
  double total = 0.0;
  for (Candidate& c : cands) {
    c.logit = std::exp((c.logit - max) / temp);
    total += c.logit;
  }

  size_t keep = cands.size();
  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    double cum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      cum += cands[i].logit;
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {
    const double threshold = static_cast<double>(params_.min_p) * cands.front().logit;
    size_t n = 1;
    while (n < keep && cands[n].logit >= threshold) ++n;
    keep = n;
  }

  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += cands[i].logit;
  const double target = u * kept;
  double cum = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += cands[i].logit;
    if (cum > target) return cands[i].id;
    if (cands[i].logit > 0.0) last_positive = i;
  }
  return cands[last_positive].id;  // only reached when u x kept rounds up to kept
}

}  // namespace pagellm
