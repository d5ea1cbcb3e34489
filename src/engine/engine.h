// The engine: owns the KV cache, the scheduler and the requests, and runs
// steps (schedule -> copy-on-write -> one batched forward pass -> sample ->
// stream). Not thread-safe: one thread owns an Engine (see AsyncEngine for
// the threaded front). Events are delivered synchronously from step().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "engine/kv_runtime.h"
#include "engine/mask_prefetch.h"
#include "engine/draft_length.h"
#include "engine/request.h"
#include "grammar/token_mask.h"
#include "engine/scheduler.h"
#include "engine/speculation.h"
#include "kvcache/kv_cache_manager.h"
#include "kvcache/disk_tier.h"
#include "kvcache/host_tier.h"
#include "kvcache/kv_cache_storage.h"
#include "model/runner.h"
#include "planner/planner.h"
#include "tokenizer/tokenizer.h"
#include "util/step_profile.h"
#include "util/thread_pool.h"

namespace pagellm {

// What a command asks of its engine beyond the plan.
struct RunOptions {
  int32_t max_batched_tokens = 2048;
  int32_t max_prefill_tokens_while_decoding = 256;  // 0: no cap (SchedulerConfig)
  bool prefix_caching = true;
  SpeculationConfig speculation;
  std::function<bool()> memory_ok;  // EngineConfig::memory_ok
  std::function<int64_t()> memory_room;  // EngineConfig::memory_room
  std::function<int64_t(const std::string&)> device_memory_room;  // EngineConfig's
  bool elastic_pool = true;              // EngineConfig::elastic_pool
  DiskTierOptions disk_tier;        // EngineConfig::disk_tier
  HostTierOptions host_tier;        // EngineConfig::host_tier
};

struct EngineConfig {
  // The engine the plan was made for: its cache (blocks of every KV group),
  // context and sequences, with the command's options.
  static EngineConfig from_plan(const Plan& plan, const RunOptions& run);

  int32_t num_blocks = 0;  // KV cache size in blocks (0: enough for max_seq_len)
  int32_t block_size = 16;
  DType kv_type = DType::F16;
  bool prefix_caching = true;
  int32_t max_seq_len = 0;  // 0: the model's trained context
  SchedulerConfig scheduler;
  // Sliding-window layers keep their KV in window groups (kvcache/kv_group.h)
  // that free blocks as they leave the window; false: one group, every block
  // kept (the same tokens, more memory).
  bool window_kv_groups = true;
  // Blocks of each window group (ModelRunner::kv_groups() order, groups 1..);
  // empty: the planner's kv_group_blocks() for the scheduler's limits.
  std::vector<int32_t> window_group_blocks;
  // Swap guard while serving: called at most every `memory_check_ms`; while it
  // returns false, no new sequence is admitted. Empty: never paused.
  std::function<bool()> memory_ok;
  int32_t memory_check_ms = 100;
  // The elastic pool (kvcache/elastic_pool.h): group 0's host pools populate
  // chunks of about pool_chunk_bytes as blocks are needed while memory_room()
  // (host bytes usable above the swap guard's headroom; empty: unlimited)
  // stays positive after it; at each memory check with memory_room() < 0
  // the engine gives back top chunks for the deficit (never chunk 0):
  // their cached blocks dropped, the newest sequences holding blocks there
  // preempted (computed again later, the same tokens). False: the pools are
  // populated whole at start.
  bool elastic_pool = false;
  size_t pool_chunk_bytes = size_t{32} << 20;
  std::function<int64_t()> memory_room;
  // The same for each device whose pools are in memory of its own (a GPU, a
  // staged device; KvDeviceBytes::own_memory): its free memory above its
  // headroom (CUDA: cudaMemGetInfo), by device name. A shortfall gives back
  // chunks until that device's pools have freed it. Empty: not watched.
  std::function<int64_t(const std::string& device)> device_memory_room;
  // A step's draws run on the thread pool, one sequence per task, when they
  // read at least this many logits together (e.g. 5 sequences of a 32000-token
  // vocabulary); fewer run on the engine thread, where a parallel region
  // would cost more than it saves. The tokens do not depend on it.
  int64_t parallel_sampling_logits = int64_t{1} << 17;
  // Speculative decoding (engine/speculation.h); off unless ngram > 0 or
  // draft_model (then set_draft_proposer gives the proposer).
  SpeculationConfig speculation;
  // Models with recurrent layers: the prefix cache's state checkpoints, one
  // every this many tokens (0: the planner's rule) and this many (-1: the
  // rule; 0: no prefix caching). KvRuntimeConfig::checkpoint_tokens.
  int32_t state_checkpoint_tokens = 0;
  int32_t state_checkpoints = -1;
  // The prefix cache's disk tier (kvcache/disk_tier.h): off when dir is empty.
  DiskTierOptions disk_tier;
  // Its host tier (kvcache/host_tier.h), before the disk tier: off at 0 bytes.
  HostTierOptions host_tier;

  // The KV runtime of this engine on `model` (num_blocks must be set): its
  // groups, and a workspace for the largest step the scheduler makes. The
  // ranks of a pipeline build theirs with it too.
  KvRuntimeConfig kv_runtime(const ModelRunner& model) const;
};

// One sequence in the scheduler, for GET /slots.
struct SequenceStats {
  uint64_t id = 0;
  int64_t n_prompt = 0;
  int64_t n_tokens = 0;    // prompt + generated so far
  int64_t n_computed = 0;  // of those, in the KV cache
  int64_t max_total = 0;   // it stops (length) at this many tokens
  bool running = false;    // false: waiting for admission (or preempted)
};

struct EngineStats {
  uint64_t steps = 0;
  uint64_t requests_finished = 0;
  uint64_t prompt_tokens = 0;           // prompt tokens of admitted requests
  uint64_t tokens_computed = 0;         // tokens run through the model (prefill, recompute, decode)
  uint64_t prompt_tokens_computed = 0;  // of those, prompt positions
  uint64_t cached_prompt_tokens = 0;    // prompt tokens served by the prefix cache
  uint64_t generated_tokens = 0;
  uint64_t preemptions = 0;
  int32_t running = 0;
  int32_t waiting = 0;
  BlockAllocatorStats blocks;
  int64_t slots_allocated = 0;    // block slots held by running sequences
  int64_t tokens_stored = 0;      // tokens in those slots
  uint64_t spec_proposed = 0;     // drafted tokens verified (speculative decoding)
  uint64_t spec_accepted = 0;     // of those, the ones that became output
  bool disk_tier = false;         // the prefix cache has a disk tier
  DiskTierStats disk;
  bool host_tier = false;         // the prefix cache has a host tier
  HostTierStats host;
  // Blocks restored from a tier by a worker beside a forward pass.
  uint64_t restores_overlapped = 0;
  bool admission_paused = false;  // the swap guard holds new sequences back
  std::vector<KvDeviceBytes> kv_pool;  // per device: bytes held now and planned
  bool elastic_pool = false;
  ElasticPoolStats pool;              // the elastic pool's chunks and events
  uint64_t admission_pauses = 0;  // times it started holding them back
  std::vector<SequenceStats> sequences;  // running ones, then waiting ones
};

class Engine {
 public:
  Engine(ModelRunner& model, const Tokenizer& tokenizer, ThreadPool& pool, EngineConfig config);
  ~Engine();

  // Queues a request. Throws ConfigError for invalid input (empty prompt,
  // out-of-vocabulary ids, prompt over the context or the cache). An
  // embedding request (Request::embedding) runs its prompt in the same steps
  // as everything else and ends with the pooled vector; its blocks are freed then.
  uint64_t submit(Request req, EventFn on_event);
  // Ends a request now (finish_reason "abort"); its blocks are freed at once.
  void abort(uint64_t request_id);
  // Ends a request now with finish_reason "error" and `error` as the reason.
  void fail(uint64_t request_id, const std::string& error);
  // Runs one step; returns false if there was nothing to do. A failure that
  // belongs to some requests (out of memory reserving a sequence's blocks or
  // in the forward pass, an exception while sampling one request) ends those
  // requests with finish_reason "error" and frees their blocks; the others
  // carry on unchanged.
  bool step();
  bool has_work() const { return scheduler_->has_work(); }
  // The swap guard's periodic check (at most every memory_check_ms; step()
  // runs it too): pauses admission while memory is short, and shrinks the
  // elastic pool. watches_memory(): an idle engine should still call it
  // (its elastic pool holds chunks it could give back).
  void check_memory();
  bool watches_memory() const;
  // Drafts come from `proposer` (a draft model) instead of prompt lookup;
  // needs config.speculation.draft_model (the workspace has rows for them).
  void set_draft_proposer(std::unique_ptr<DraftProposer> proposer);
  // Called in step() once the batch is scheduled, before the forward pass
  // (which may take seconds for a long prompt), so that an observer's
  // stats() count the sequences being prefilled as running.
  void set_step_observer(std::function<void()> fn) { step_observer_ = std::move(fn); }
  // Tests: a decode step's seconds by its rows in place of the measured
  // time, which a shared machine's load varies (draft lengths follow it).
  void set_step_seconds(std::function<double(int64_t rows)> fn) { step_seconds_ = std::move(fn); }

  EngineStats stats() const;
  // The decode steps' time split so far (util/step_profile.h; empty unless
  // PAGELLM_STEP_PROFILE=1 or enable_step_profile()); printed to stderr when
  // the engine ends.
  const StepProfileTotals& step_profile() const { return step_profile_; }
  const EngineConfig& config() const { return config_; }
  int64_t max_seq_len() const { return max_seq_len_; }
  KvCacheManager& kv_manager() { return kv_->manager(); }

 private:
  // Recurrent state copies for the next step's Batch::state_saves: (parent
  // slot, forked sample's slot) and (sequence's slot, checkpoint slot).
  std::vector<std::pair<int32_t, int32_t>> state_saves_;
  // Hybrid prefix cache: the checkpoint slot a sequence admitted with
  // n_computed cached tokens restores; the checkpoints the step's prompts reached.
  int32_t restore_point(const Sequence& s);
  void save_checkpoints(const SchedulerOutput& out);
  struct SeqState;
  struct RequestState;

  // One sequence's draw of a step: sampled (possibly on a pool thread),
  // then emitted on the engine thread.
  struct Draw {
    SeqState* st;
    const float* logits;
    int32_t token = -1;
    bool failed = false;  // the request ends with `error`
    std::string error;
  };
  // Queues st's draw from `logits` (a fault injected here fails it).
  void add_draw(SeqState& st, const float* logits);
  void draw(Draw& d) const;
  void sample_all(std::vector<Draw>& draws);
  void emit(SeqState& st, int32_t id);
  void finish_seq(SeqState& st, FinishReason reason, int32_t token = -1,
                  const std::string& error = {});
  void fail_request(RequestState& rs, const std::string& error);
  // Gives back elastic pool chunks, top first, until `memory`'s pools
  // ("host": host RAM's, else that device's) have freed `bytes`.
  void shrink_pool(const std::string& memory, uint64_t bytes);
  // What `memory`'s KV pools hold now and may grow to.
  KvDeviceBytes pool_bytes_in(const std::string& memory) const;
  void drop_finished_requests();
  void fork_samples(SeqState& parent);
  // Speculative decoding: sets Sequence::draft of the decoding sequences
  // before scheduling, and after the pass verifies what was granted.
  void propose_drafts();
  void verify_drafts(SeqState& st, const float* rows, int64_t n_draft);

  ModelRunner& model_;
  const Tokenizer& tokenizer_;
  // The vocabulary as grammars see it, and the masks its sequences share;
  // built with the first constrained request.
  std::shared_ptr<const GrammarVocab> grammar_vocab_;
  std::shared_ptr<MaskCache> mask_cache_;
  // Computes a step's masks while its forward pass runs: where the machine
  // has more cores than the pool has threads (PAGELLM_MASK_PREFETCH=1: always, 0: never).
  std::unique_ptr<MaskPrefetcher> mask_prefetch_;
  ThreadPool& pool_;
  EngineConfig config_;
  int64_t max_seq_len_;
  std::unique_ptr<KvRuntime> kv_;
  std::unique_ptr<DiskTier> disk_tier_;  // after kv_: it reads kv_'s storage
  std::unique_ptr<HostTier> host_tier_;  // after disk_tier_: it hands blocks down to it
  std::unique_ptr<Scheduler> scheduler_;
  std::map<uint64_t, std::unique_ptr<RequestState>> requests_;
  std::map<const Sequence*, SeqState*> by_seq_;
  uint64_t next_request_id_ = 1;
  uint64_t next_seq_id_ = 1;
  EngineStats stats_;
  std::chrono::steady_clock::time_point last_memory_check_{};
  bool memory_check_failed_ = false;  // warned once until a check reads again
  Batch batch_;
  std::vector<Draw> draws_;
  std::unique_ptr<DraftProposer> proposer_;
  std::vector<DraftWant> draft_wants_;
  std::vector<SpecControl*> draft_controls_;  // draft_wants_[i]'s sequence's
  StepCostModel step_cost_;                    // decode steps' time by rows
  std::function<double(int64_t)> step_seconds_;
  std::function<void()> step_observer_;
  StepTimer timer_;
  StepProfileTotals step_profile_;
};

}  // namespace pagellm
