#include "engine/pooling.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "util/enum_names.h"
#include "util/error.h"

namespace pagellm {

const char* pooling_name(Pooling p) {
  // Numbered as the GGUF key (1, 2, 3): 0 has no name.
  static constexpr std::array<const char*, 4> kNames = {"", "mean", "cls", "last"};
  static_assert(names_cover(Pooling::kLast, kNames));
  return enum_name(p, kNames, "");
}

std::optional<Pooling> parse_pooling(std::string_view name) {
  for (Pooling p : {Pooling::kMean, Pooling::kCls, Pooling::kLast})
    if (name == pooling_name(p)) return p;
  return std::nullopt;
}

std::optional<Pooling> pooling_from_gguf(int64_t value) {
  if (value >= 1 && value <= 3) return static_cast<Pooling>(value);
  return std::nullopt;
}

EmbeddingPooler::EmbeddingPooler(Pooling pooling, int64_t n_embd, int64_t n_tokens)
    : pooling_(pooling), n_embd_(n_embd), n_tokens_(n_tokens), acc_(static_cast<size_t>(n_embd)) {
  if (n_embd <= 0 || n_tokens <= 0) throw Error("an embedding needs a positive width and length");
}

void EmbeddingPooler::reset() {
  next_ = 0;
  std::fill(acc_.begin(), acc_.end(), 0.0);
}

void EmbeddingPooler::add(int64_t pos, const float* rows, int64_t n) {
  if (pos != next_ || n < 0 || pos + n > n_tokens_)
    throw Error(fmt::format("embedding rows for positions [{}, {}) arrived, expected from {} (of {})",
                            pos, pos + n, next_, n_tokens_));
  const size_t E = static_cast<size_t>(n_embd_);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = rows + static_cast<size_t>(i) * E;
    const int64_t p = pos + i;
    if (pooling_ == Pooling::kMean) {
      for (size_t j = 0; j < E; ++j) acc_[j] += row[j];
    } else if ((pooling_ == Pooling::kCls && p == 0) ||
               (pooling_ == Pooling::kLast && p == n_tokens_ - 1)) {
      for (size_t j = 0; j < E; ++j) acc_[j] = row[j];
    }
  }
  next_ = pos + n;
}

std::vector<float> EmbeddingPooler::result() const {
  std::vector<double> v = acc_;
  if (pooling_ == Pooling::kMean)
    for (double& x : v) x /= static_cast<double>(n_tokens_);
  double norm = 0.0;
  for (double x : v) norm += x * x;
  norm = std::sqrt(norm);
  std::vector<float> out(v.size());
  for (size_t j = 0; j < v.size(); ++j) out[j] = static_cast<float>(norm > 0.0 ? v[j] / norm : 0.0);
  return out;
}

}  // namespace pagellm
