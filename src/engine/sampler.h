// Picks the next token from a row of logits.
//
// Steps, in this order:
//  1. Repetition penalty: each distinct token among the last `repeat_last_n`
//     ids of the history gets its logit divided by `repetition_penalty` when
//     positive, multiplied by it otherwise (llama.cpp's rule).
//  1b. Presence and frequency penalties (OpenAI's rule), over the generated
//     tokens only (history[n_prompt:]): a token generated c > 0 times gets
//     logit -= presence_penalty + c x frequency_penalty.
//  1c. Logit bias (OpenAI's logit_bias): each listed token's logit gets its
//     bias added (-100 all but bans it, +100 all but forces it).
//  2. temperature == 0: greedy, the largest logit, lowest id on ties.
//  3. Otherwise the candidates are ordered by logit (descending, lower id
//     first on ties), turned into probabilities softmax(logit / temperature),
//     and cut by top_k (keep the k best), then top_p (keep the shortest prefix
//     whose probability mass reaches top_p, renormalised after top_k), then
//     min_p (keep those with probability >= min_p x the best one's).
//  4. One uniform draw u in [0, 1) picks the token from what is left: the
//     first whose cumulative probability exceeds u x total, walking in the
//     order of step 3.
//
// Determinism: each Sampler owns a std::mt19937_64 seeded with `seed`, and
// every call to sample() advances it exactly once, whatever the parameters
// (greedy calls too). A request's token t therefore depends only on the seed,
// t, its logits and its history; a resumed request can rebuild its Sampler and
// discard() the draws already used. All arithmetic is in double, in a fixed order.
// With every token a candidate (no top_k) the masses are summed per bucket of
// similar probability and only the buckets where a cut or the draw falls are
// sorted: the same rule, with sums that round differently from a walk over
// a full sort (where a top_p cut or the draw falls within rounding of a
// partial sum, the two can keep or pick a neighbouring token).
// NaN logits count as -infinity.
//
// Log-probabilities (logprobs(), after sample()) are the log-softmax of the
// logits after steps 1-1c (penalties and bias applied) and before temperature and the
// top_k/top_p/min_p cuts: the model's distribution as penalised, the same
// whatever the temperature.
//
// Draws without penalties or bias (the common serving case) read the float logits
// in place and copy nothing; logprobs() then reads the same logits, which
// must still be there when it is called.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace pagellm {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;  // natural log; -infinity for impossible tokens
};

struct SamplingParams {
  float temperature = 0.8f;         // 0 = greedy; must be >= 0
  int32_t top_k = 40;               // 0 = off; must be >= 0
  float top_p = 0.95f;              // 1 = off; must be in (0, 1]
  float min_p = 0.05f;              // 0 = off; must be in [0, 1]
  float repetition_penalty = 1.0f;  // 1 = off; must be > 0
  int32_t repeat_last_n = 64;       // 0 = off, -1 = the whole history
  float presence_penalty = 0.0f;    // 0 = off; must be in [-2, 2]
  float frequency_penalty = 0.0f;   // 0 = off; must be in [-2, 2]
  // (token id, bias in [-100, 100]) pairs, each id at most once; ids must be
  // below the vocabulary size (sample() throws Error otherwise).
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;

  // Throws ConfigError with the first bad field, e.g.
  // "temperature must be >= 0 (got -1)" or "top_p must be in (0, 1] (got 1.5)".
  void validate() const;
};

// The first index of the largest value of x[0, n), NaN counting as -infinity
// (0 when every value is -infinity or NaN, or n <= 0).
int32_t first_argmax(const float* x, int64_t n);

class Sampler {
 public:
  // Validates `params` (ConfigError).
  explicit Sampler(const SamplingParams& params);

  // The next token. `logits` holds n_vocab values; `history` is the ids so far
  // (prompt and generated); those the penalty looks at must be in [0, n_vocab)
  // (else throws Error). The first `n_prompt` ids of `history` are the prompt,
  // which the presence/frequency penalties ignore. Advances the generator once.
  int32_t sample(const float* logits, int n_vocab, std::span<const int32_t> history,
                 size_t n_prompt = 0);

  // After sample(): the log-probability of `token`, and in `top` (when not
  // null) the `top_n` most likely tokens, most likely first, lower id first on
  // ties. See the header comment for which distribution this is.
  TokenLogprob logprobs(int32_t token, int32_t top_n, std::vector<TokenLogprob>* top) const;

  // Skips `n` draws, as if sample() had been called `n` times.
  void discard(uint64_t n);
  uint64_t draws() const { return draws_; }
  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    double logit;
  };
  // Uniform in [0, 1) from one generator step.
  double next_uniform();
  int32_t pick(std::vector<Candidate>& cands, double u) const;
  bool penalizes() const;
  // penalized_ from the logits, with NaN as -infinity (no penalties).
  void copy_logits(const float* logits, int n_vocab) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  uint64_t draws_ = 0;
  // Logits after the penalties; filled lazily (by logprobs()) after a plain
  // greedy draw, from `unpenalized_`.
  mutable std::vector<double> penalized_;
  mutable const float* unpenalized_ = nullptr;
  int n_vocab_ = 0;
  std::vector<Candidate> cands_;  // scratch
  // Every token a candidate (no top_k): the draw through value buckets,
  // sorting only those where a cut or the draw falls (see draw_all).
  template <class ValueOf>
  int32_t draw_all(const ValueOf& value_of, int n_vocab, double max, double u);
  mutable std::vector<double> prob_;     // per token (scratch of logprobs() too)
  std::vector<uint16_t> bucket_of_;      // per token
  std::vector<uint32_t> bucket_count_;   // tokens per bucket
  std::vector<double> bucket_mass_;      // their probabilities, summed
  std::vector<double> bucket_mass_odd_;  // scratch: the odd tokens' sums
  std::vector<int32_t> members_;         // of one bucket, in the order
};

}  // namespace pagellm
