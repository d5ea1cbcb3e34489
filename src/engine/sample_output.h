// What one sample of a request gives back besides its token ids: the text
// (detokenized as whole UTF-8 characters), cut at the first stop string,
// with a tail that may still become a stop string held back until it cannot
// (or the sample ends); the log-probabilities of each drawn token; the
// prompt's logits; and the sample's place in its grammar, which masks the
// logits it draws from. The engine holds one per sample and decides when
// and from which logits it draws; this class decides what the client sees.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "grammar/token_mask.h"
#include "tokenizer/detokenizer.h"

namespace pagellm {

class Sampler;

// The vocabulary as grammars see it (each token's bytes without control
// text; the end-of-generation ids).
std::shared_ptr<const GrammarVocab> make_grammar_vocab(const Tokenizer& tokenizer);

class SampleOutput {
 public:
  // Sample `index` of `req` (whose stop strings are copied). `vocab` is
  // needed when req.grammar is set (its masks are cached in `masks`, shared
  // by the sequences of `vocab`; null: a cache of its own); throws
  // ConfigError when that grammar matches no text.
  SampleOutput(const Tokenizer& tokenizer, const Request& req, int32_t index,
               std::shared_ptr<const GrammarVocab> vocab,
               std::shared_ptr<MaskCache> masks = nullptr);
  // Sample `index` going on from where this one is (the end of the shared
  // prompt): the same grammar state, no text.
  SampleOutput fork(int32_t index) const;

  // Whether draws are masked by a grammar.
  bool constrained() const { return grammar_ != nullptr; }
  // On any thread (touches only this sample's grammar state), while the
  // forward pass runs: computes the mask of the current grammar state for
  // the next draw_from. An error is kept and thrown by that draw_from.
  void prepare_mask() noexcept;

  // Drawing, on any thread (touches only this sample). The logits to draw
  // from, n_generated tokens into the sample: `logits` itself or, with a
  // grammar, this sample's masked copy (Error when it allows no token). Sample
  // 0 keeps the prompt's logits first if the request asked for them.
  const float* draw_from(const float* logits, int64_t n_vocab, int64_t n_generated);
  // After `sampler` drew `token` from them: the grammar consumes it (Error
  // when it may not), and its log-probabilities are kept for the event.
  void drawn(int32_t token, const Sampler& sampler);

  // On the engine thread. Appends `token`'s text; true when the token ends
  // the sample as "stop": an end-of-generation token (unless ignore_eos), or
  // a stop string completed (the text is cut before it; stop_index()).
  bool push(int32_t token);
  // A token event (ev.token set): the text no stop string can claim any
  // more, the token's log-probabilities, the prompt's logits (once).
  void fill_event(SeqEvent& ev);
  // The sample's final event (ev.token set or -1): the rest of the text
  // (held-back text released, the detokenizer flushed) unless it was aborted
  // or failed, and the stop string's index.
  void fill_final_event(SeqEvent& ev, FinishReason reason);

  // Which Request::stop string ended the sample; -1: none (yet).
  int32_t stop_index() const { return stop_index_; }

 private:
  SampleOutput(const SampleOutput& parent, int32_t index);
  void fill_token(SeqEvent& ev);

  const Tokenizer& tokenizer_;
  int32_t index_;
  bool ignore_eos_;
  int32_t top_logprobs_;  // Request::logprobs
  bool want_prompt_logits_;
  std::vector<std::string> stops_;
  size_t longest_stop_ = 0;
  StreamingDetokenizer detok_;
  std::string text_;    // decoded output so far (cut at a stop string)
  size_t emitted_ = 0;  // bytes of text_ already sent
  int32_t stop_index_ = -1;
  // Of the last drawn token, when the request asks for them.
  bool has_logprob_ = false;
  float logprob_ = 0.0f;
  std::vector<TokenLogprob> top_;
  std::vector<float> prompt_logits_;  // until the first token's event carries them
  // Constrained decoding: this sample's place in the grammar, its mask cache,
  // and its masked copy of the logits row (the row may be a sibling's too).
  std::shared_ptr<const GrammarVocab> vocab_;
  std::unique_ptr<GrammarMatcher> grammar_;
  std::unique_ptr<TokenMasker> masker_;
  std::vector<float> masked_;
  // prepare_mask()'s result, for the state it was computed in (generation
  // and stacks); dropped when the grammar moves on.
  std::shared_ptr<const TokenMask> prepared_;
  std::exception_ptr prepare_error_;
  uint64_t prepared_generation_ = 0;
  std::vector<int32_t> prepared_stacks_;
};

}  // namespace pagellm
