// The engine's draws (sampling a step's rows, on the pool when there are
// many) and speculative decoding around them: drafts proposed before a step,
// verified against the rows the step computed for them.
#include <algorithm>
#include <exception>

#include "engine/engine.h"
#include "engine/engine_state.h"
#include "util/error.h"
#include "util/fault_injector.h"

namespace pagellm {

void Engine::add_draw(SeqState& st, const float* logits) {
  Draw& d = draws_.emplace_back(Draw{&st, logits});
  if (FaultInjector::hit("engine.sample", static_cast<int64_t>(st.req->id))) {
    d.failed = true;
    d.error = describe_failure(InjectedFault("injected fault while sampling"), "sampling");
  }
}

void Engine::draw(Draw& d) const {
  // Runs on any thread: touches only this sequence's sampler and output
  // and reads its tokens; errors are kept for the engine thread.
  if (d.failed) return;
  SeqState& st = *d.st;
  try {
    const Sequence& seq = *st.seq;
    const int64_t V = model_.hparams().n_vocab;
    const float* logits = st.out.draw_from(d.logits, V, seq.n_generated());
    d.token = st.sampler.sample(logits, static_cast<int>(V), seq.tokens,
                                static_cast<size_t>(seq.n_prompt));
    st.out.drawn(d.token, st.sampler);
  } catch (const std::exception& e) {
    d.failed = true;
    try {
      d.error = describe_failure(e, "sampling");
    } catch (...) {  // no memory for the message: emit() names the failure
    }
  }
}

void Engine::sample_all(std::vector<Draw>& draws) {
  const int64_t n = static_cast<int64_t>(draws.size());
  if (n > 1 && pool_.size() > 1 &&
      n * model_.hparams().n_vocab >= config_.parallel_sampling_logits) {
    pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) draw(draws[static_cast<size_t>(i)]);
    });
  } else {
    for (Draw& d : draws) draw(d);
  }
}

namespace {
bool decodes(const Sequence* s) {
  return s->n_pending() == 1 && s->n_computed >= s->n_prompt;
}
}  // namespace

void Engine::propose_drafts() {
  if (!proposer_) return;
  for (auto& [seq, st] : by_seq_) st->seq->draft.clear();
  const auto& running = scheduler_->running();
  const auto n_decoding = std::count_if(running.begin(), running.end(), decodes);
  if (n_decoding == 0 || n_decoding > config_.speculation.max_batch) return;
  draft_wants_.clear();
  draft_controls_.clear();
  for (Sequence* s : running) {
    if (!decodes(s)) continue;
    SeqState& st = *by_seq_.at(s);
    if (st.done) continue;
    st.spec.observe(s->tokens);
    // Verifying k drafts emits up to k + 1 tokens.
    const int64_t room = s->max_total - static_cast<int64_t>(s->tokens.size()) - 1;
    const int32_t k = static_cast<int32_t>(std::min<int64_t>(st.spec.next(), room));
    if (k <= 0) continue;
    draft_wants_.push_back({s->id, s->tokens, k, &s->draft});
    draft_controls_.push_back(&st.spec);
  }
  if (draft_wants_.empty()) return;
  // A draft model's tokens cost passes of their own: how many is chosen
  // first. Prompt lookup's cost nothing: what it found is cut after.
  if (config_.speculation.draft_model) {
    const auto k = fit_draft_lengths(draft_wants_, draft_controls_, false, n_decoding, step_cost_);
    for (size_t i = 0; i < k.size(); ++i) draft_wants_[i].k = k[i];
  }
  try {
    proposer_->propose(draft_wants_);
  } catch (const std::exception&) {
    // Drafts only ever save time: without them the step decodes as usual.
    for (const DraftWant& w : draft_wants_) w.out->clear();
  }
  const auto k = fit_draft_lengths(draft_wants_, draft_controls_, true, n_decoding, step_cost_);
  for (size_t i = 0; i < k.size(); ++i) draft_wants_[i].out->resize(static_cast<size_t>(k[i]));
}

void Engine::verify_drafts(SeqState& st, const float* rows, int64_t n_draft) {
  // Row 0 was drawn and emitted with the rest of the step. Row r >= 1 holds
  // the logits after draft r - 1, which count only while every token drawn
  // so far equalled its draft; each draw is the one decoding without drafts
  // would make (same logits, history, grammar state and generator).
  Sequence& seq = *st.seq;
  const int64_t V = model_.hparams().n_vocab;
  int64_t matched = 0;
  int64_t emitted = 1;
  while (!st.done && matched < n_draft &&
         seq.tokens.back() == seq.draft[static_cast<size_t>(matched)]) {
    ++matched;
    // A failure here loses nothing: the rows not drawn are computed again.
    if (FaultInjector::hit("engine.verify", static_cast<int64_t>(st.req->id))) break;
    Draw d{&st, rows + matched * V};
    draw(d);
    try {
      if (d.failed) {
        fail_request(*st.req, d.error.empty() ? "out of memory during sampling" : d.error);
        break;
      }
      emit(st, d.token);
      ++emitted;
    } catch (const std::exception& e) {
      fail_request(*st.req, describe_failure(e, "sampling"));
    }
  }
  stats_.spec_proposed += static_cast<uint64_t>(n_draft);
  stats_.spec_accepted += static_cast<uint64_t>(matched);
  st.spec.record(static_cast<int32_t>(n_draft), static_cast<int32_t>(matched));
  // The K/V of every emitted token but the last is in the cache (each equals
  // the draft it was computed for); the last one runs in the next step.
  if (!st.done) scheduler_->accept_draft(&seq, emitted - 1);
}

}  // namespace pagellm
