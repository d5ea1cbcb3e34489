// The engine's private state per request and per sample, shared by the
// files that implement Engine (engine.cpp, engine_sampling.cpp); nothing
// outside the engine includes it.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/pooling.h"
#include "engine/sample_output.h"
#include "engine/sampler.h"
#include "engine/speculation.h"

namespace pagellm {

struct Engine::RequestState {
  uint64_t id = 0;
  Request req;
  EventFn on_event;
  std::vector<std::unique_ptr<SeqState>> seqs;
};

struct Engine::SeqState {
  SeqState(RequestState* r, int32_t index, std::unique_ptr<Sequence> s, const SamplingParams& sp,
           SampleOutput o)
      : req(r), index(index), seq(std::move(s)), sampler(sp), out(std::move(o)) {}
  RequestState* req;
  int32_t index;
  std::unique_ptr<Sequence> seq;
  Sampler sampler;
  SampleOutput out;  // text, stop strings, logprobs, prompt logits, grammar
  bool done = false;
  SpecControl spec;  // how many tokens to draft (speculative decoding)
  // Request::embedding: the prompt's rows pooled so far, then the vector.
  std::unique_ptr<EmbeddingPooler> pooler;
  std::vector<float> embedding;
};

// The error text for a failure during `what` of a step.
std::string describe_failure(const std::exception& e, const char* what);

}  // namespace pagellm
