#include "engine/sample_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "engine/sampler.h"
#include "util/error.h"
#include "util/step_profile.h"

namespace pagellm {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of a stop string.
size_t held_back(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const auto& s : stops)
    for (size_t len = std::min(s.size() - 1, text.size()); len > hold; --len)
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  return hold;
}

}  // namespace

std::shared_ptr<const GrammarVocab> make_grammar_vocab(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id)
    pieces[static_cast<size_t>(id)] = tokenizer.token_to_piece(id, /*special=*/false);
  return std::make_shared<GrammarVocab>(std::move(pieces), tokenizer.vocab().eog_ids());
}

SampleOutput::SampleOutput(const Tokenizer& tokenizer, const Request& req, int32_t index,
                           std::shared_ptr<const GrammarVocab> vocab,
                           std::shared_ptr<MaskCache> masks)
    : tokenizer_(tokenizer),
      index_(index),
      ignore_eos_(req.ignore_eos),
      top_logprobs_(req.logprobs),
      want_prompt_logits_(req.prompt_logits && index == 0),
      stops_(req.stop),
      detok_(tokenizer, req.special_text) {
  for (const auto& s : stops_) longest_stop_ = std::max(longest_stop_, s.size());
  if (req.grammar) {
    if (!vocab) throw Error("a grammar needs the grammar vocabulary");
    vocab_ = std::move(vocab);
    grammar_ = std::make_unique<GrammarMatcher>(req.grammar);
    if (grammar_->dead()) throw ConfigError("the grammar matches no text");
    masker_ = std::make_unique<TokenMasker>(vocab_, std::move(masks));
  }
}

SampleOutput::SampleOutput(const SampleOutput& parent, int32_t index)
    : tokenizer_(parent.tokenizer_),
      index_(index),
      ignore_eos_(parent.ignore_eos_),
      top_logprobs_(parent.top_logprobs_),
      want_prompt_logits_(false),  // sample 0's alone
      stops_(parent.stops_),
      longest_stop_(parent.longest_stop_),
      detok_(parent.detok_),
      vocab_(parent.vocab_) {
  if (parent.grammar_) {
    grammar_ = std::make_unique<GrammarMatcher>(*parent.grammar_);
    masker_ = std::make_unique<TokenMasker>(vocab_, parent.masker_->cache());
  }
}

SampleOutput SampleOutput::fork(int32_t index) const {
  return SampleOutput(*this, index);
}

const float* SampleOutput::draw_from(const float* logits, int64_t n_vocab, int64_t n_generated) {
  if (want_prompt_logits_ && n_generated == 0) prompt_logits_.assign(logits, logits + n_vocab);
  if (!grammar_) return logits;
  StepProfileScope profile(StepPhase::kGrammarCpu);
  std::shared_ptr<const TokenMask> mask;
  if (prepared_ || prepare_error_) {
    if (grammar_->generation() == prepared_generation_ && grammar_->stacks() == prepared_stacks_) {
      if (prepare_error_) std::rethrow_exception(std::exchange(prepare_error_, nullptr));
      mask = std::move(prepared_);
    }
    prepared_.reset();
    prepare_error_ = nullptr;
  }
  if (!mask) mask = masker_->shared_mask(*grammar_);
  masked_.assign(logits, logits + n_vocab);
  if (TokenMasker::apply(*mask, masked_.data(), n_vocab) == 0)
    throw Error(fmt::format("the grammar allows no token after {} generated tokens", n_generated));
  return masked_.data();
}

void SampleOutput::prepare_mask() noexcept {
  if (!grammar_) return;
  StepProfileScope profile(StepPhase::kGrammarCpu);
  try {
    prepared_.reset();
    prepare_error_ = nullptr;
    prepared_generation_ = grammar_->generation();
    prepared_stacks_ = grammar_->stacks();
    prepared_ = masker_->shared_mask(*grammar_);
  } catch (...) {  // thrown again by draw_from, on the thread that draws
    prepare_error_ = std::current_exception();
  }
}

void SampleOutput::drawn(int32_t token, const Sampler& sampler) {
  if (grammar_ && !vocab_->is_eog(token) && !grammar_->advance(vocab_->bytes(token)))
    throw Error(fmt::format("token {} is outside the grammar", token));
  if (top_logprobs_ >= 0) {
    has_logprob_ = true;
    logprob_ = sampler.logprobs(token, top_logprobs_, &top_).logprob;
  }
}

bool SampleOutput::push(int32_t token) {
  if (tokenizer_.is_eog(token) && !ignore_eos_) return true;
  text_ += detok_.push(token);
  if (stops_.empty()) return false;
  // A stop string ends after emitted_ (what is before it was safe to send):
  // search from where the longest one could start. The earliest match wins.
  const size_t from = emitted_ > longest_stop_ ? emitted_ - longest_stop_ : 0;
  size_t cut = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t p = text_.find(stops_[i], from);
    if (p != std::string::npos && p < cut) {
      cut = p;
      stop_index_ = static_cast<int32_t>(i);
    }
  }
  if (cut == std::string::npos) return false;
  text_.resize(cut);
  return true;
}

void SampleOutput::fill_token(SeqEvent& ev) {
  if (ev.token < 0) return;
  if (has_logprob_) {
    ev.has_logprob = true;
    ev.logprob = logprob_;
    ev.top_logprobs = top_;
  }
  ev.prompt_logits = std::move(prompt_logits_);
}

void SampleOutput::fill_event(SeqEvent& ev) {
  fill_token(ev);
  const size_t safe = text_.size() - (stops_.empty() ? 0 : held_back(text_, stops_));
  if (safe > emitted_) {
    ev.text = text_.substr(emitted_, safe - emitted_);
    emitted_ = safe;
  }
}

void SampleOutput::fill_final_event(SeqEvent& ev, FinishReason reason) {
  // A stop string cut the text; otherwise the detokenizer's last bytes belong to it.
  if (stop_index_ < 0) text_ += detok_.flush();
  if (reason != FinishReason::kAbort && reason != FinishReason::kError && emitted_ < text_.size())
    ev.text = text_.substr(emitted_);
  emitted_ = text_.size();
  fill_token(ev);
  ev.stop_index = stop_index_;
}

}  // namespace pagellm
