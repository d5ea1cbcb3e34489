// The scheduler: a pure step from the running and waiting sequences and the
// KV cache's free blocks to `{sequence: tokens to run}` for one forward pass.
//
// Policy (FCFS, chunked prefill, preemption by recompute):
//  1. Running sequences first, in admission order: each gets its pending
//     tokens (1 for a decode, a chunk for an unfinished prefill) within the
//     token budget. While any sequence is decoding, prompt tokens in the step
//     are further capped (max_prefill_tokens_while_decoding) so that a long
//     prefill cannot stall every decode for seconds (inter-token latency). If the cache cannot hold
//     them, the most recently admitted running sequence is preempted (blocks freed, full blocks
//     stay in the prefix cache) and requeued at the front of the waiting queue, until the sequence
//     fits or is itself the one preempted.
//  2. Then waiting sequences in arrival order while sequences and budget
//     remain: the prefix cache covers what it can, a chunk of the rest is
//     scheduled. The first one that does not fit stops admission (no
//     overtaking). With prefix caching, a sequence whose prompt shares full
//     blocks with a running sequence that is still computing them waits a
//     step or a few, and then takes them from the cache instead of computing
//     the same blocks again (a burst of requests with one system prompt
//     prefills it once).
//     A prompt whose cached blocks come from a tier beyond the pool (host
//     or disk) is admitted (with room for its first chunk, as any other)
//     but runs from the next step on: their bytes are
//     copied in beside this step's forward pass (KvCacheManager's deferred
//     restores), and a sequence is not computed on while its table holds a
//     block being copied in.
//  3. Last, drafted tokens (speculative decoding) of decoding sequences, in
//     the token budget and logit rows left: never preempting or delaying
//     anything for them, and only as far as free blocks allow. The pass
//     after verification commits the accepted ones (accept_draft) and gives
//     back the blocks of the rejected ones.
// A reservation that throws (out of memory) fails only that sequence: it is
// reported in SchedulerOutput::failed and the others are scheduled as usual.
// A sequence whose prompt cannot fit in the whole cache is rejected when added.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/sequence.h"
#include "kvcache/kv_cache_manager.h"

namespace pagellm {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_batched_tokens = 2048;
  // Prompt (prefill) tokens per step while at least one running sequence is
  // decoding; 0 means only max_batched_tokens applies. On a CPU a prefill
  // token costs about as much as a batched decode token, so 256 keeps a
  // decode step under a second while prefill still moves in large chunks.
  int32_t max_prefill_tokens_while_decoding = 256;
  // Logit rows a step may have beyond one per sequence, for drafted tokens
  // (speculative decoding; 0: none).
  int32_t max_draft_rows = 0;
  // > 0: a prefill chunk that ends inside the prompt ends at a multiple of
  // this many tokens (recurrent layers' chunked kernels give the same bits
  // whatever the batch only for such cuts: backend/recurrent_args.h).
  int32_t prefill_align = 0;
  // > 0 (hybrid models with prefix caching): a prompt chunk also ends at
  // the multiples of this many tokens inside the prompt and at the
  // sequence's checkpoint_at, where the engine saves recurrent-state
  // checkpoints (kvcache/state_checkpoints.h). checkpoint_at is where a
  // prefix shared with another prompt ends (aligned down): found cached
  // past the last checkpoint at admission, or awaited by a waiting prompt.
  int32_t checkpoint_every = 0;
  // Admission counts a sequence's forks (Sequence::forks) against
  // max_num_seqs: for models whose samples each need a state slot.
  bool reserve_forks = false;
};

struct ScheduledSeq {
  Sequence* seq;
  int64_t n_tokens;  // tokens [seq->n_computed, seq->n_computed + n_tokens) run this step
  // Of those, the last n_draft are seq->draft's first n_draft (positions
  // from seq->tokens.size() on): each gets a logit row to verify it.
  int64_t n_draft = 0;
};

// A sequence whose KV reservation threw (e.g. out of memory): it was not
// scheduled, and the engine ends its request with an error.
struct SchedulerFailure {
  Sequence* seq;
  std::string error;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> scheduled;  // running ones first, then newly admitted
  std::vector<BlockCopy> copies;        // copy-on-write, before the forward pass
  std::vector<Sequence*> preempted;
  std::vector<Sequence*> restoring;  // admitted, waiting for their blocks' copies
  std::vector<SchedulerFailure> failed;
  int64_t n_tokens() const;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, KvCacheManager& kv);

  const SchedulerConfig& config() const { return config_; }
  // Queues a new sequence. Throws ConfigError if its prompt can never fit in
  // the cache (message names the capacity).
  void add(Sequence* seq);
  SchedulerOutput schedule();
  // After the forward pass: n_computed advances by what ran (drafted tokens
  // not included), full blocks are hashed into the prefix cache.
  void update_after_step(const SchedulerOutput& out);
  // After verifying a running sequence's drafted tokens: the first
  // `n_accepted` of them became its tokens (their K/V is in the cache), the
  // blocks past its tokens go back to the allocator.
  void accept_draft(Sequence* seq, int64_t n_accepted);
  // Logit rows a step may have (the model's workspace is sized for them).
  int64_t max_logit_rows() const { return max_logit_rows(config_); }
  static int64_t max_logit_rows(const SchedulerConfig& c) {
    return std::min<int64_t>(c.max_batched_tokens,
                             static_cast<int64_t>(c.max_num_seqs) + c.max_draft_rows);
  }
  // Removes a sequence (finished or aborted) and frees its blocks at once.
  void finish(Sequence* seq);
  // Adds `child`, a fork of running `parent` sharing its blocks, as running.
  void add_fork(Sequence* parent, Sequence* child);

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  // While paused, no waiting sequence is admitted (running ones continue);
  // the engine pauses when host memory runs low (swap guard).
  void set_admission_paused(bool paused) { admission_paused_ = paused; }
  bool admission_paused() const { return admission_paused_; }
  uint64_t total_preemptions() const { return preemptions_; }
  // Preempts running `seq` now, between steps, as schedule() does when the
  // cache runs short (its blocks freed, computed again from its first token).
  void preempt_now(Sequence* seq) { preempt(seq); }

 private:
  // n tokens of s's pending ones, cut to config_.prefill_align and at the
  // next checkpoint position (0: none fit).
  int64_t aligned_chunk(const Sequence* s, int64_t n) const;
  // Running sequences plus the samples their prompts will fork (reserve_forks).
  int32_t seats_taken() const;
  enum class Reserve { kOk, kNoRoom, kFailed };
  // Room for `seq`'s next `n` tokens; a throw is caught and recorded in out.failed.
  Reserve reserve(Sequence* seq, int64_t n, SchedulerOutput& out);
  void preempt(Sequence* seq);
  // The front waiting sequence becomes running (its lookups counted).
  void admit(Sequence* seq, const PrefixLookups& lookups);
  // Pass 3 of schedule(): drafted tokens within what is left of `budget`.
  void grant_drafts(SchedulerOutput& out, int64_t budget);
  // True if a running sequence is computing full blocks that `seq`'s tokens
  // share beyond what the prefix cache already gave it (that sequence then
  // saves a state checkpoint where they end, on hybrids).
  bool awaits_shared_prefix(const Sequence* seq);
  // Checkpoint positions are multiples of this (the kernel's chunk and the block size).
  int64_t checkpoint_unit() const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  uint64_t admit_counter_ = 0;
  uint64_t preemptions_ = 0;
  bool admission_paused_ = false;
};

}  // namespace pagellm
