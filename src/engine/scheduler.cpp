#include "engine/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <new>
#include <numeric>

#include "util/error.h"
#include "util/fault_injector.h"

namespace pagellm {

int64_t SchedulerOutput::n_tokens() const {
  int64_t n = 0;
  for (const auto& s : scheduled) n += s.n_tokens;
  return n;
}

Scheduler::Scheduler(SchedulerConfig config, KvCacheManager& kv) : config_(config), kv_(kv) {
  if (config.max_num_seqs <= 0 || config.max_batched_tokens <= 0)
    throw ConfigError("max-num-seqs and max-batched-tokens must be positive");
  if (config.max_draft_rows < 0) throw ConfigError("max-draft-rows must not be negative");
  if (config.max_prefill_tokens_while_decoding < 0)
    throw ConfigError("max-prefill-tokens-while-decoding must not be negative");
}

void Scheduler::add(Sequence* seq) {
  const int64_t capacity = kv_.capacity_tokens();
  if (seq->embedding && seq->n_prompt > capacity)
    throw ConfigError(fmt::format("the input ({} tokens) does not fit in the KV cache of {} tokens",
                                  seq->n_prompt, capacity));
  if (!seq->embedding && seq->n_prompt + 1 > capacity)
    throw ConfigError(fmt::format(
        "the prompt ({} tokens) plus one generated token does not fit in the KV cache of {} "
        "tokens ({} blocks of {})",
        seq->n_prompt, capacity, kv_.allocator().num_blocks(), kv_.block_size()));
  seq->max_total = std::min(seq->max_total, capacity);
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq);
}

Scheduler::Reserve Scheduler::reserve(Sequence* seq, int64_t n, SchedulerOutput& out) {
  try {
    if (FaultInjector::hit("kv.reserve", static_cast<int64_t>(seq->id))) throw std::bad_alloc();
    return kv_.reserve(seq->blocks, seq->n_computed, seq->n_computed + n, out.copies)
               ? Reserve::kOk
               : Reserve::kNoRoom;
  } catch (const std::bad_alloc&) {
    out.failed.push_back({seq, "out of memory while reserving KV cache blocks"});
  } catch (const std::exception& e) {
    out.failed.push_back({seq, std::string("KV cache reservation failed: ") + e.what()});
  }
  return Reserve::kFailed;
}

void Scheduler::preempt(Sequence* seq) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  kv_.free(seq->blocks);
  seq->n_computed = 0;
  seq->status = SeqStatus::kWaiting;
  ++seq->preemptions;
  ++preemptions_;
  waiting_.push_front(seq);
}

namespace {
// Its prompt (and, after a preemption, its earlier output) is in the cache:
// it needs one token per step.
bool is_decoding(const Sequence* s) {
  return s->n_pending() == 1 && s->n_computed >= s->n_prompt;
}
}  // namespace

int64_t Scheduler::checkpoint_unit() const {
  return std::lcm<int64_t>(std::max(config_.prefill_align, 1), kv_.block_size());
}

bool Scheduler::awaits_shared_prefix(const Sequence* seq) {
  if (!kv_.prefix_caching() || seq->embedding) return false;
  const int64_t bs = kv_.block_size();
  // match_prefix leaves at least one token to compute.
  const int64_t reusable_end = static_cast<int64_t>(seq->tokens.size()) - 1;
  if (reusable_end < bs) return false;
  for (Sequence* r : running_) {
    if (r->n_computed >= reusable_end) continue;
    const auto [a, b] = std::mismatch(seq->tokens.begin(), seq->tokens.begin() + reusable_end,
                                      r->tokens.begin(), r->tokens.end());
    const int64_t shared = (static_cast<int64_t>(a - seq->tokens.begin()) / bs) * bs;
    if (shared > seq->n_computed && r->n_computed < shared) {
      // Hybrids: r saves its state where the shared prefix ends (aligned).
      const int64_t at = shared / checkpoint_unit() * checkpoint_unit();
      if (config_.checkpoint_every > 0 && at > r->n_computed && r->checkpoint_at <= r->n_computed)
        r->checkpoint_at = at;
      return true;
    }
  }
  return false;
}

int64_t Scheduler::aligned_chunk(const Sequence* s, int64_t n) const {
  if (const int64_t every = config_.checkpoint_every; every > 0) {
    int64_t next = (s->n_computed / every + 1) * every;
    if (s->checkpoint_at > s->n_computed) next = std::min(next, s->checkpoint_at);
    if (next <= s->n_prompt && s->n_computed + n > next) n = next - s->n_computed;
  }
  const int64_t align = config_.prefill_align;
  const int64_t end = s->n_computed + n;
  if (align <= 0 || n == 0 || end >= s->n_prompt) return n;
  return std::max<int64_t>(0, end / align * align - s->n_computed);
}

int32_t Scheduler::seats_taken() const {
  auto n = static_cast<int32_t>(running_.size());
  // A running prompt's samples fork when it ends: their seats are taken now.
  if (config_.reserve_forks)
    for (const Sequence* s : running_) n += s->forks;
  return n;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_batched_tokens;
  int64_t prefill_budget = budget;
  if (config_.max_prefill_tokens_while_decoding > 0 &&
      std::any_of(running_.begin(), running_.end(), is_decoding))
    prefill_budget = std::min<int64_t>(prefill_budget, config_.max_prefill_tokens_while_decoding);

  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    if (kv_.restoring(s->blocks)) {  // its blocks are still being copied in
      ++i;
      continue;
    }
    const bool prefill = !is_decoding(s);
    const int64_t n =
        aligned_chunk(s, std::min({s->n_pending(), budget, prefill ? prefill_budget : budget}));
    if (n == 0) {  // a prefill chunk waits for a step with prefill budget
      ++i;
      continue;
    }
    bool self_preempted = false;
    Reserve r;
    while ((r = reserve(s, n, out)) == Reserve::kNoRoom) {
      Sequence* victim = running_.back();
      preempt(victim);
      out.preempted.push_back(victim);
      if (victim == s) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;    // s was the last running sequence
    if (r == Reserve::kFailed) {  // stays running until the engine finishes it
      ++i;
      continue;
    }
    out.scheduled.push_back({s, n});
    budget -= n;
    if (prefill) prefill_budget -= n;
    ++i;
  }

  // Admitting while preempting would thrash: wait for the next step.
  while (!admission_paused_ && out.preempted.empty() && !waiting_.empty() &&
         std::min(budget, prefill_budget) > 0 &&
         seats_taken() + (config_.reserve_forks ? waiting_.front()->forks : 0) <
             config_.max_num_seqs) {
    Sequence* s = waiting_.front();
    PrefixLookups lookups;  // counted if it is admitted now (else matched again later)
    if (s->blocks.blocks().empty() && !s->embedding) {  // an embedding needs every position's rows
      s->n_computed = kv_.match_prefix(s->tokens, s->blocks, &lookups);
      s->n_cached_prompt = std::min(s->n_computed, s->n_prompt);
      // Hybrids: cached blocks past the last checkpoint are computed again;
      // a checkpoint where they end serves the next prompt that shares them.
      if (config_.checkpoint_every > 0) {
        const int64_t at = static_cast<int64_t>(lookups.found) * kv_.block_size() /
                           checkpoint_unit() * checkpoint_unit();
        s->checkpoint_at = at > s->n_computed ? at : 0;
      }
    }
    if (awaits_shared_prefix(s)) {
      kv_.free(s->blocks);  // matched again when it is admitted
      s->n_computed = 0;
      break;
    }
    const int64_t n = aligned_chunk(s, std::min({s->n_pending(), budget, prefill_budget}));
    if (n == 0) {  // an aligned chunk does not fit what is left of the step
      kv_.free(s->blocks);
      s->n_computed = 0;
      break;
    }
    const Reserve r = reserve(s, n, out);
    if (r == Reserve::kFailed) {
      waiting_.pop_front();
      kv_.free(s->blocks);
      s->n_computed = 0;
      continue;
    }
    if (r == Reserve::kNoRoom) {
      kv_.free(s->blocks);  // give back the prefix blocks until it can run
      s->n_computed = 0;
      break;
    }
    admit(s, lookups);
    if (kv_.restoring(s->blocks)) {  // room kept; it runs once its blocks are copied in
      out.restoring.push_back(s);
      continue;
    }
    out.scheduled.push_back({s, n});
    budget -= n;
    prefill_budget -= n;
  }
  grant_drafts(out, budget);
  return out;
}

void Scheduler::admit(Sequence* s, const PrefixLookups& lookups) {
  waiting_.pop_front();
  kv_.allocator().count_lookups(lookups.queries, lookups.hits);
  s->status = SeqStatus::kRunning;
  s->admitted_order = ++admit_counter_;
  running_.push_back(s);
}

void Scheduler::grant_drafts(SchedulerOutput& out, int64_t budget) {
  int64_t rows_left = max_logit_rows() - static_cast<int64_t>(out.scheduled.size());
  for (auto& sc : out.scheduled) {
    Sequence* s = sc.seq;
    if (s->draft.empty() || sc.n_tokens != 1 || !is_decoding(s)) continue;
    const int64_t size = static_cast<int64_t>(s->tokens.size());
    // Verifying k drafts emits up to k + 1 tokens: stay within max_total.
    const int64_t k = std::min({static_cast<int64_t>(s->draft.size()), budget, rows_left,
                                s->max_total - size - 1});
    if (k <= 0) continue;
    try {
      // From n_computed, as pass 1 did: a window group must keep what that token's query reads.
      if (!kv_.reserve(s->blocks, s->n_computed, size + k, out.copies)) continue;
    } catch (const std::exception&) {
      continue;  // drafts are optional: the decode goes ahead without them
    }
    sc.n_draft = k;
    sc.n_tokens += k;
    budget -= k;
    rows_left -= k;
  }
}

void Scheduler::update_after_step(const SchedulerOutput& out) {
  for (const auto& sc : out.scheduled) {
    Sequence* s = sc.seq;
    s->n_computed += sc.n_tokens - sc.n_draft;
    kv_.commit(s->tokens, s->blocks, s->n_computed);
  }
}

void Scheduler::accept_draft(Sequence* s, int64_t n_accepted) {
  s->n_computed += n_accepted;
  kv_.commit(s->tokens, s->blocks, s->n_computed);
  kv_.truncate(s->blocks, static_cast<int64_t>(s->tokens.size()));
}

void Scheduler::finish(Sequence* seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end()) running_.erase(it);
  auto wt = std::find(waiting_.begin(), waiting_.end(), seq);
  if (wt != waiting_.end()) waiting_.erase(wt);
  kv_.free(seq->blocks);
  seq->status = SeqStatus::kFinished;
}

void Scheduler::add_fork(Sequence* parent, Sequence* child) {
  kv_.fork(parent->blocks, child->blocks);
  child->n_computed = parent->n_computed;
  child->status = SeqStatus::kRunning;
  child->admitted_order = ++admit_counter_;
  running_.push_back(child);
}

}  // namespace pagellm
