// What a client asks the engine for, and what it hears back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/pooling.h"
#include "engine/sampler.h"
#include "grammar/grammar.h"

namespace pagellm {

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int32_t max_tokens = 128;
  int32_t n = 1;  // independent samples sharing the prompt's KV blocks
  // The text of control tokens is part of the output (formats whose markers
  // are special tokens, such as harmony's <|channel|>, are parsed from it).
  bool special_text = false;
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  // -1: no log-probabilities. k in [0, 20]: every event with a token carries
  // that token's logprob and the k most likely tokens (see Sampler::logprobs).
  int32_t logprobs = -1;
  // The full logits at the last prompt position (before any sampling
  // transform) come back on sample 0's first token event.
  bool prompt_logits = false;
  // Constrained decoding: every sample's tokens follow this grammar (each
  // sample its own matcher); end-of-generation is allowed where it may end.
  std::shared_ptr<const Grammar> grammar;
  // An embedding: the prompt is computed (never from the prefix cache) and
  // its final-normed hidden states pooled; the sequence then ends with one
  // event carrying the vector, its blocks freed. Sampling fields, n and
  // max_tokens are ignored; the prompt may fill the whole context.
  bool embedding = false;
  Pooling pooling = Pooling::kMean;
};

// Why a sample ended. finish_reason_name() gives the names of the logs and
// metrics (and OpenAI's); each API's writer maps it to its own word.
enum class FinishReason : uint8_t {
  kNone,    // not finished
  kStop,    // end of sequence, or a stop string
  kLength,  // max_tokens or the context
  kAbort,   // the client went away / the request was cancelled
  kError,   // refused or failed: SeqEvent::error says why
  // The reply is tool calls: set by the server when it finds them in a
  // sample that stopped, never by the engine.
  kToolCalls,
};

inline const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kNone:
      break;
  }
  return "";
}

// One event per generated token (and one final event per sample).
struct SeqEvent {
  uint64_t request_id = 0;
  int32_t index = 0;   // which of the n samples
  int32_t token = -1;  // -1: no token in this event
  std::string text;    // new text (complete UTF-8), may be empty
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;  // when finished
  // On the final event: which Request::stop string ended the sample (-1:
  // none; it ended otherwise, an end-of-generation token included).
  int32_t stop_index = -1;
  std::string error;          // set with finish_reason "error": why the request was refused
  // The request's last event: every one of its samples has had its final
  // event (the one owner of that count; consumers read this flag).
  bool request_finished = false;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  // When the request asked for logprobs and `token` >= 0: its log-probability
  // and the most likely alternatives (Request::logprobs of them).
  bool has_logprob = false;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  // Request::prompt_logits: n_vocab logits, on sample 0's first token event.
  std::vector<float> prompt_logits;
  // Request::embedding: the pooled, L2-normalized vector (n_embd floats) on
  // the final event (finish_reason "stop").
  std::vector<float> embedding;
};

using EventFn = std::function<void(const SeqEvent&)>;

}  // namespace pagellm
