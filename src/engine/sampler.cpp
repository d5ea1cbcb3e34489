#include "engine/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

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
}

namespace {

// Keys whose unsigned order is the descending order of the values (not
// NaN; -0 and +0 one key, as they compare equal).
uint32_t descending_key(float v) {
  if (v == 0.0f) v = 0.0f;
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits >> 31) ? bits : ~(bits | (uint32_t{1} << 31));
}
uint64_t descending_key(double v) {
  if (v == 0.0) v = 0.0;
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits >> 63) ? bits : ~(bits | (uint64_t{1} << 63));
}

// Sorts `a` by key, stably: LSD radix of 11-bit digits, skipping digits that
// every key shares.
template <class T>
void radix_sort(std::vector<T>& a, std::vector<T>& tmp) {
  constexpr int kKeyBits = 8 * sizeof(T::key);
  constexpr int kBits = 11, kPasses = (kKeyBits + kBits - 1) / kBits;
  constexpr size_t kBuckets = size_t{1} << kBits;
  std::vector<uint32_t> counts(kPasses * kBuckets, 0);
  for (const T& x : a)
    for (int p = 0; p < kPasses; ++p)
      ++counts[p * kBuckets + ((x.key >> (p * kBits)) & (kBuckets - 1))];
  tmp.resize(a.size());
  for (int p = 0; p < kPasses; ++p) {
    uint32_t* c = counts.data() + p * kBuckets;
    if (std::find(c, c + kBuckets, static_cast<uint32_t>(a.size())) != c + kBuckets) continue;
    uint32_t sum = 0;
    for (size_t b = 0; b < kBuckets; ++b) sum += std::exchange(c[b], sum);
    for (const T& x : a) tmp[c[(x.key >> (p * kBits)) & (kBuckets - 1)]++] = x;
    a.swap(tmp);
  }
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
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
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
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
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
    // Every token, in the order `before` gives, by a stable radix sort of
    // keys that order the values from the largest down (ids come in
    // increasing order, so ties stay lower id first): linear in the
    // vocabulary, where a comparison sort of 128k candidates costs ~10 ms.
    if (plain)
      order_all(keyed32_, keyed32_tmp_, logit, n_vocab);
    else
      order_all(keyed64_, keyed64_tmp_, penalized, n_vocab);
  }
  if (cands_.front().logit == kNegInf) return cands_.front().id;  // nothing possible: id 0
  return pick(cands_, u);
}

template <class Key, class ValueOf>
void Sampler::order_all(std::vector<KeyedId<Key>>& keyed, std::vector<KeyedId<Key>>& tmp,
                        const ValueOf& value_of, int n_vocab) {
  // value_of(id): a float (32-bit keys) or a double (64-bit keys), not NaN.
  keyed.resize(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i)
    keyed[static_cast<size_t>(i)] = {descending_key(value_of(i)), i};
  radix_sort(keyed, tmp);
  cands_.resize(static_cast<size_t>(n_vocab));
  for (size_t j = 0; j < keyed.size(); ++j)
    cands_[j] = {keyed[j].id, static_cast<double>(value_of(keyed[j].id))};
}

bool Sampler::penalizes() const {
  return (params_.repetition_penalty != 1.0f && params_.repeat_last_n != 0) ||
         params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
}

void Sampler::copy_logits(const float* logits, int n_vocab) const {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  penalized_.resize(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i)
    penalized_[i] = std::isnan(logits[i]) ? kNegInf : static_cast<double>(logits[i]);
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
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const double max = *std::max_element(penalized_.begin(), penalized_.end());
  double lse = max;  // log(sum(exp(l))), computed around the max
  if (max != kNegInf) {
    double sum = 0.0;
    for (double l : penalized_) sum += std::exp(l - max);
    lse = max + std::log(sum);
  }
  auto logprob = [&](int32_t id) -> float {
    const double l = penalized_[static_cast<size_t>(id)];
    if (l == kNegInf || max == kNegInf) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(l - lse);
  };
  if (top != nullptr) {
    top->clear();
    const int32_t k = std::clamp(top_n, 0, n_vocab);
    if (k > 0) {
      std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
      for (int32_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = i;
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        const double la = penalized_[static_cast<size_t>(a)];
        const double lb = penalized_[static_cast<size_t>(b)];
        return la > lb || (la == lb && a < b);
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
