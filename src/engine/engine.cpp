#include "engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string_view>
#include <thread>

#include "backend/recurrent_args.h"
#include "engine/disk_tier_setup.h"
#include "engine/engine_state.h"
#include "engine/sample_output.h"
#include "util/error.h"
#include "util/fault_injector.h"

namespace pagellm {

namespace {

SamplingParams sample_params(const SamplingParams& base, int32_t index) {
  SamplingParams p = base;
  p.seed = base.seed + static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ull;
  return p;
}

// The first tier of the prefix cache's chain (host, then disk); null: none.
PrefixTier* tier_chain_head(const std::unique_ptr<HostTier>& host,
                            const std::unique_ptr<DiskTier>& disk) {
  return host ? static_cast<PrefixTier*>(host.get()) : disk.get();
}

}  // namespace

std::string describe_failure(const std::exception& e, const char* what) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return fmt::format("out of memory during {}", what);
  if (dynamic_cast<const Error*>(&e)) return fmt::format("{} failed: {}", what, e.what());
  return fmt::format("internal error during {}: {}", what, e.what());
}

Engine::Engine(ModelRunner& model, const Tokenizer& tokenizer, ThreadPool& pool,
               EngineConfig config)
    : model_(model), tokenizer_(tokenizer), pool_(pool), config_(config) {
  const auto& hp = model.hparams();
  if (tokenizer.n_vocab() != hp.n_vocab)
    throw ConfigError(fmt::format("the tokenizer has {} tokens but the model's vocabulary is {}",
                                  tokenizer.n_vocab(), hp.n_vocab));
  max_seq_len_ = config.max_seq_len > 0 ? config.max_seq_len : hp.n_ctx_train;
  if (config_.num_blocks <= 0)
    config_.num_blocks =
        static_cast<int32_t>((max_seq_len_ + config.block_size - 1) / config.block_size);
  if (config_.speculation.draft_max < 0 || config_.speculation.ngram < 0 ||
      config_.speculation.max_batch < 0)
    throw ConfigError("draft-max, spec-ngram and the speculation batch must not be negative");
  config_.scheduler.max_draft_rows = config_.speculation.draft_rows();
  if (hp.has_recurrent()) {
    // A recurrent state cannot take back rejected drafts, and its chunked
    // prefill gives the same bits only for cuts at the kernel's chunk size.
    if (config_.speculation.enabled())
      throw ConfigError(fmt::format(
          "speculative decoding is not supported for {} models (their recurrent layers' state "
          "cannot take back rejected tokens)",
          hp.arch));
    if (config_.scheduler.max_batched_tokens < kGatedDeltaChunk)
      throw ConfigError(fmt::format(
          "--max-batched-tokens must be at least {} for models with recurrent layers (got {})",
          kGatedDeltaChunk, config_.scheduler.max_batched_tokens));
    config_.scheduler.prefill_align = kGatedDeltaChunk;
    config_.scheduler.reserve_forks = true;  // every sample has its own state slot
  }
  // Everything a step needs is allocated now: the plan counted it, and a step
  // must never be the one that runs the machine out of memory. The KV pools
  // follow the layers: each device's pool is in the memory of the backend
  // that runs its layers.
  KvRuntimeConfig kv_config = config_.kv_runtime(model);
  if (config_.elastic_pool) {
    kv_config.elastic = true;
    kv_config.elastic_options.chunk_bytes = config_.pool_chunk_bytes;
    auto room = config_.memory_room;
    auto device_room = config_.device_memory_room;
    if (room || device_room)
      kv_config.elastic_options.may_grow = [room, device_room](const std::string& memory,
                                                               size_t bytes) {
        const bool host = memory == "host";
        if (host ? !room : !device_room) return true;
        return (host ? room() : device_room(memory)) >= static_cast<int64_t>(bytes);
      };
  }
  kv_ = std::make_unique<KvRuntime>(model, std::move(kv_config));
  // Hybrid models: prefix caching only with state checkpoints, whose
  // positions must be chunk ends for the state to exist there.
  config_.prefix_caching = kv_->manager().prefix_caching();
  if (!config_.disk_tier.dir.empty()) disk_tier_ = make_disk_tier(config_.disk_tier, model, *kv_);
  if (config_.host_tier.max_bytes > 0)
    host_tier_ = make_host_tier(config_.host_tier, model, *kv_, disk_tier_.get());
  kv_->manager().set_prefix_tier(tier_chain_head(host_tier_, disk_tier_));
  // Restored blocks are copied in beside the next forward pass (step()).
  kv_->manager().set_deferred_restores(true);
  if (const StateCheckpoints* c = kv_->checkpoints())
    config_.scheduler.checkpoint_every = c->interval();
  scheduler_ = std::make_unique<Scheduler>(config_.scheduler, kv_->manager());
  const int64_t max_rows = Scheduler::max_logit_rows(config_.scheduler);
  draws_.reserve(static_cast<size_t>(max_rows) * 2);
  if (config_.speculation.enabled() && !config_.speculation.draft_model)
    proposer_ = std::make_unique<NgramProposer>(config_.speculation.ngram);
}

EngineConfig EngineConfig::from_plan(const Plan& plan, const RunOptions& run) {
  EngineConfig c;
  c.num_blocks = plan.num_blocks;
  c.block_size = plan.block_size;
  c.kv_type = plan.kv_type;
  c.prefix_caching = run.prefix_caching;
  c.max_seq_len = static_cast<int32_t>(plan.max_seq_len);
  // The checkpoints the plan charged (hybrid models with prefix caching).
  if (plan.recurrent_layers > 0 && run.prefix_caching) c.state_checkpoints = plan.state_checkpoints;
  c.scheduler.max_num_seqs = plan.max_num_seqs;
  c.scheduler.max_batched_tokens = run.max_batched_tokens;
  c.scheduler.max_prefill_tokens_while_decoding = run.max_prefill_tokens_while_decoding;
  c.scheduler.max_draft_rows = run.speculation.draft_rows();
  const std::vector<int32_t> blocks = plan.kv_group_blocks();
  c.window_group_blocks.assign(blocks.begin() + 1, blocks.end());
  c.memory_ok = run.memory_ok;
  c.memory_room = run.memory_room;
  c.device_memory_room = run.device_memory_room;
  c.elastic_pool = run.elastic_pool;
  c.disk_tier = run.disk_tier;
  c.host_tier = run.host_tier;
  c.speculation = run.speculation;
  return c;
}

KvRuntimeConfig EngineConfig::kv_runtime(const ModelRunner& model) const {
  const KvGroups groups = model.kv_groups();
  std::vector<int32_t> blocks = kv_group_blocks(groups, block_size, scheduler.max_num_seqs,
                                                scheduler.max_batched_tokens, num_blocks);
  for (size_t i = 0; i < window_group_blocks.size() && i + 1 < blocks.size(); ++i)
    blocks[i + 1] = window_group_blocks[i];
  SchedulerConfig sc = scheduler;
  sc.max_draft_rows = speculation.draft_rows();
  KvRuntimeConfig k;
  k.groups = cache_groups(groups, blocks, window_kv_groups);
  k.block_size = block_size;
  k.kv_type = kv_type;
  k.prefix_caching = prefix_caching;
  k.workspace_tokens = scheduler.max_batched_tokens;
  k.workspace_rows = Scheduler::max_logit_rows(sc);
  k.state_slots = scheduler.max_num_seqs;
  k.checkpoint_tokens = state_checkpoint_tokens;
  k.checkpoints = state_checkpoints;
  k.max_seq_len = max_seq_len > 0 ? max_seq_len : model.hparams().n_ctx_train;
  return k;
}

void Engine::set_draft_proposer(std::unique_ptr<DraftProposer> proposer) {
  if (!config_.speculation.enabled() || !config_.speculation.draft_model)
    throw ConfigError(
        "a draft model needs EngineConfig::speculation.draft_model and draft_max > 0");
  proposer_ = std::move(proposer);
}

Engine::~Engine() {
  if (step_profile_.steps == 0) return;
  try {
    fmt::print(stderr, "pagellm: {}", step_profile_.table());
  } catch (...) {  // a report, not worth failing the shutdown for
  }
}

uint64_t Engine::submit(Request req, EventFn on_event) {
  const int64_t n_prompt = static_cast<int64_t>(req.prompt.size());
  if (n_prompt == 0) throw ConfigError("the prompt is empty");
  for (int32_t id : req.prompt)
    if (id < 0 || id >= model_.hparams().n_vocab)
      throw ConfigError(fmt::format("token id {} is outside the vocabulary (0..{})", id,
                                    model_.hparams().n_vocab - 1));
  if (req.embedding) {
    if (n_prompt > max_seq_len_)
      throw ConfigError(fmt::format("the input is {} tokens, but the context is {} tokens",
                                    n_prompt, max_seq_len_));
    if (!model_.last_stage())
      throw ConfigError("embeddings need the model's last layer in this process (not a pipeline)");
    // Nothing is sampled: the sampling fields do not apply.
    req.max_tokens = 0;
    req.n = 1;
    req.logprobs = -1;
    req.prompt_logits = false;
    req.grammar.reset();
  } else if (n_prompt >= max_seq_len_) {
    throw ConfigError(
        fmt::format("the prompt is {} tokens, but the context is {} tokens (at "
                    "least one must be left to generate)",
                    n_prompt, max_seq_len_));
  }
  if (req.max_tokens < 0) throw ConfigError("max_tokens must be >= 0");
  if (req.n < 1 || req.n > 128)
    throw ConfigError(fmt::format("n must be in [1, 128], got {}", req.n));
  // Each sample of a model with recurrent layers keeps its own state: n of
  // them run at once, which --max-num-seqs bounds.
  if (config_.scheduler.reserve_forks && req.n > config_.scheduler.max_num_seqs)
    throw ConfigError(fmt::format(
        "n = {} samples need {} recurrent state slots; this model keeps at most --max-num-seqs {}",
        req.n, req.n, config_.scheduler.max_num_seqs));
  for (const auto& s : req.stop)
    if (s.empty()) throw ConfigError("stop strings must not be empty");
  if (req.logprobs < -1 || req.logprobs > 20)
    throw ConfigError(fmt::format("logprobs must be in [0, 20] (got {})", req.logprobs));
  req.sampling.validate();

  auto rs = std::make_unique<RequestState>();
  rs->id = next_request_id_++;
  const int64_t max_total = std::min<int64_t>(n_prompt + req.max_tokens, max_seq_len_);
  auto seq = std::make_unique<Sequence>(next_seq_id_++, req.prompt, max_total, config_.block_size);
  seq->embedding = req.embedding;
  seq->forks = req.embedding ? 0 : req.n - 1;
  // The vocabulary as grammars see it: built with the first constrained request.
  if (req.grammar && !grammar_vocab_) {
    grammar_vocab_ = make_grammar_vocab(tokenizer_);
    mask_cache_ = std::make_shared<MaskCache>();
    // Only with a core the forward pass leaves free: where the pool's threads
    // take every core, waking the worker preempts them or the engine thread
    // (0.5-1 ms a step on a loaded 2-core host, for ~20 us of masks), and a
    // batch's draws already compute their masks in parallel on the pool.
    const char* env = std::getenv("PAGELLM_MASK_PREFETCH");
    const std::string_view prefetch = env ? env : "";
    if (prefetch == "1" || (prefetch != "0" && std::thread::hardware_concurrency() >
                                                   static_cast<unsigned>(pool_.size())))
      mask_prefetch_ = std::make_unique<MaskPrefetcher>();
  }
  auto st =
      std::make_unique<SeqState>(rs.get(), 0, std::move(seq), sample_params(req.sampling, 0),
                                 SampleOutput(tokenizer_, req, 0, grammar_vocab_, mask_cache_));
  st->spec = SpecControl(config_.speculation.draft_max, config_.speculation.draft_model);
  if (req.embedding)
    st->pooler = std::make_unique<EmbeddingPooler>(req.pooling, model_.hparams().n_embd, n_prompt);
  rs->seqs.reserve(static_cast<size_t>(req.n));
  scheduler_->add(st->seq.get());  // may throw: nothing registered yet
  by_seq_[st->seq.get()] = st.get();
  // The disk tier reads its blocks while it waits (kvcache/block_prefetch.h).
  if (!req.embedding) kv_->manager().prefetch(st->seq->id, req.prompt);
  rs->req = std::move(req);
  rs->on_event = std::move(on_event);
  rs->seqs.push_back(std::move(st));
  stats_.prompt_tokens += static_cast<uint64_t>(n_prompt);
  const uint64_t id = rs->id;
  requests_[id] = std::move(rs);
  if (requests_[id]->req.max_tokens == 0 && !requests_[id]->req.embedding) {
    finish_seq(*requests_[id]->seqs[0], FinishReason::kLength);
    drop_finished_requests();
  }
  return id;
}

void Engine::abort(uint64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  for (auto& st : it->second->seqs) finish_seq(*st, FinishReason::kAbort);
  drop_finished_requests();
}

void Engine::fail(uint64_t request_id, const std::string& error) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  fail_request(*it->second, error);
  drop_finished_requests();
}

void Engine::fail_request(RequestState& rs, const std::string& error) {
  for (auto& st : rs.seqs) finish_seq(*st, FinishReason::kError, -1, error);
}

void Engine::drop_finished_requests() {
  for (auto it = requests_.begin(); it != requests_.end();) {
    RequestState& rs = *it->second;
    const bool all_done =
        std::all_of(rs.seqs.begin(), rs.seqs.end(), [](const auto& s) { return s->done; });
    if (!all_done) {
      ++it;
      continue;
    }
    for (auto& s : rs.seqs) by_seq_.erase(s->seq.get());
    ++stats_.requests_finished;
    it = requests_.erase(it);
  }
}

void Engine::finish_seq(SeqState& st, FinishReason reason, int32_t token,
                        const std::string& error) {
  if (st.done) return;
  st.done = true;
  scheduler_->finish(st.seq.get());
  kv_->release_state_slot(st.seq->state_slot);
  if (proposer_) proposer_->release(st.seq->id);
  kv_->manager().forget_prefetch(st.seq->id);
  SeqEvent ev;
  ev.request_id = st.req->id;
  ev.index = st.index;
  ev.token = token;
  ev.finished = true;
  ev.finish_reason = reason;
  st.out.fill_final_event(ev, reason);
  ev.embedding = std::move(st.embedding);
  ev.error = error;
  ev.prompt_tokens = st.seq->n_prompt;
  ev.cached_prompt_tokens = st.seq->n_cached_prompt;
  ev.generated_tokens = st.seq->n_generated();
  // A request that ends before its prompt forks ends its other samples too,
  // so every sample has a final event; the request's last one says so.
  RequestState& rs = *st.req;
  const bool last = std::all_of(rs.seqs.begin(), rs.seqs.end(), [](auto& s) { return s->done; });
  const auto n_seqs = static_cast<int32_t>(rs.seqs.size());
  ev.request_finished = last && n_seqs >= rs.req.n;
  if (rs.on_event) rs.on_event(ev);
  if (!last) return;
  for (int32_t i = n_seqs; i < rs.req.n; ++i) {
    SeqEvent other;
    other.request_id = rs.id;
    other.index = i;
    other.finished = true;
    other.finish_reason = reason;
    other.error = error;
    other.prompt_tokens = ev.prompt_tokens;
    other.cached_prompt_tokens = ev.cached_prompt_tokens;
    other.request_finished = i + 1 == rs.req.n;
    if (rs.on_event) rs.on_event(other);
  }
}

void Engine::fork_samples(SeqState& parent) {
  RequestState& rs = *parent.req;
  parent.seq->forks = 0;  // they run now, counted as running sequences
  for (int32_t i = 1; i < rs.req.n; ++i) {
    auto seq = std::make_unique<Sequence>(next_seq_id_++, parent.seq->tokens, parent.seq->max_total,
                                          config_.block_size);
    seq->n_prompt = parent.seq->n_prompt;
    seq->n_cached_prompt = parent.seq->n_cached_prompt;
    auto st = std::make_unique<SeqState>(&rs, i, std::move(seq), sample_params(rs.req.sampling, i),
                                         parent.out.fork(i));
    st->spec = SpecControl(config_.speculation.draft_max, config_.speculation.draft_model);
    if (parent.seq->state_slot >= 0) {
      // The sample goes on from the prompt's state: copied before the next step.
      st->seq->state_slot = kv_->acquire_state_slot();
      if (st->seq->state_slot >= 0)
        state_saves_.emplace_back(parent.seq->state_slot, st->seq->state_slot);
    }
    auto& slot = by_seq_[st->seq.get()];
    rs.seqs.push_back(std::move(st));  // capacity reserved at submit: no throw
    slot = rs.seqs.back().get();
    scheduler_->add_fork(parent.seq.get(), slot->seq.get());
    if (parent.seq->state_slot >= 0 && slot->seq->state_slot < 0)
      finish_seq(*slot, FinishReason::kError, -1,
                 "no recurrent state slot is free for this sample (n is larger than "
                 "--max-num-seqs leaves room for)");
  }
}

void Engine::emit(SeqState& st, int32_t id) {
  Sequence& seq = *st.seq;
  seq.tokens.push_back(id);
  ++stats_.generated_tokens;
  // The token's text goes out with the final event when it ends the sample.
  if (st.out.push(id)) return finish_seq(st, FinishReason::kStop, id);
  if (static_cast<int64_t>(seq.tokens.size()) >= seq.max_total)
    return finish_seq(st, FinishReason::kLength, id);
  SeqEvent ev;
  ev.request_id = st.req->id;
  ev.index = st.index;
  ev.token = id;
  st.out.fill_event(ev);
  ev.prompt_tokens = seq.n_prompt;
  ev.cached_prompt_tokens = seq.n_cached_prompt;
  ev.generated_tokens = seq.n_generated();
  if (st.req->on_event) st.req->on_event(ev);
}

bool Engine::step() {
  timer_.begin();
  const auto step_start = std::chrono::steady_clock::now();  // the draft lengths' cost model
  KvCacheManager& kvm = kv_->manager();
  kvm.complete_restores();  // (a step that threw may have left some)
  check_memory();
  propose_drafts();
  SchedulerOutput out = scheduler_->schedule();
  stats_.preemptions += out.preempted.size();
  // A preempted sequence is computed again from its first token: from zeros.
  for (Sequence* p : out.preempted) kv_->release_state_slot(p->state_slot);
  // Admitted: match_prefix took what was read ahead; the rest can go.
  for (const ScheduledSeq& sc : out.scheduled) kvm.forget_prefetch(sc.seq->id);
  for (const Sequence* s : out.restoring) kvm.forget_prefetch(s->id);
  if (!out.failed.empty()) {
    for (const auto& f : out.failed) fail_request(*by_seq_.at(f.seq)->req, f.error);
    // Samples of a failed request may have been scheduled: they are finished now.
    std::erase_if(out.scheduled, [&](const ScheduledSeq& sc) { return by_seq_.at(sc.seq)->done; });
    if (out.empty()) {
      kvm.complete_restores();
      drop_finished_requests();
      return true;
    }
  }
  if (out.empty()) {
    if (!kvm.has_pending_restores()) return false;
    kvm.complete_restores();  // no pass to hide them behind: their sequences run next step
    return true;
  }
  if (step_observer_) step_observer_();
  const bool decode_step =
      std::all_of(out.scheduled.begin(), out.scheduled.end(), [](const ScheduledSeq& sc) {
        return !sc.seq->embedding && sc.seq->n_computed >= sc.seq->n_prompt;
      });
  timer_.lap(StepPhase::kSchedule);

  batch_.clear();
  batch_.copies = out.copies;
  const bool recurrent = model_.hparams().has_recurrent();
  if (recurrent) {
    batch_.state_saves = std::move(state_saves_);
    state_saves_.clear();
  }
  // A sequence that samples this step: its first logit row, and how many
  // drafted tokens follow its last token (each with its own row).
  struct Sampled {
    SeqState* st;
    int64_t row;
    int64_t n_draft;
  };
  std::vector<Sampled> sampled;
  // An embedding's positions [pos, pos + n) this step: hidden rows from `row` on.
  struct Pooled {
    SeqState* st;
    int64_t row, pos, n;
  };
  std::vector<Pooled> pooled;
  int64_t rows = 0, hidden_rows = 0;
  for (const auto& sc : out.scheduled) {
    Sequence* s = sc.seq;
    const int32_t idx = batch_.add_sequence(s->blocks);
    if (recurrent) {
      if (s->state_slot < 0) {  // starts (or starts again) from zeros or a checkpoint
        s->state_slot = kv_->acquire_state_slot();
        if (s->state_slot < 0)
          throw Error("no recurrent state slot is free");  // max_num_seqs bounds the running
        if (s->n_computed > 0)
          batch_.state_copies.emplace_back(restore_point(*s), s->state_slot);
        else
          batch_.state_resets.push_back(s->state_slot);
      }
      batch_.state_slots.push_back(s->state_slot);
    }
    // Where decoding starts: recurrent layers and MLA (model/mla_block.h)
    // compute positions past it as decode steps.
    if (recurrent || model_.hparams().mla.enabled())
      batch_.step_from.push_back(static_cast<int32_t>(s->n_prompt));
    const int64_t size = static_cast<int64_t>(s->tokens.size());
    const int64_t end = s->n_computed + sc.n_tokens;
    const bool reaches_end = !s->embedding && end - sc.n_draft == size;
    if (s->embedding) {
      SeqState& st = *by_seq_.at(s);
      if (s->n_computed == 0) st.pooler->reset();  // (again, after a preemption)
      pooled.push_back({&st, hidden_rows, s->n_computed, sc.n_tokens});
      hidden_rows += sc.n_tokens;
    }
    for (int64_t p = s->n_computed; p < end; ++p)
      batch_.add_token(
          idx,
          p < size ? s->tokens[static_cast<size_t>(p)] : s->draft[static_cast<size_t>(p - size)],
          static_cast<int32_t>(p), reaches_end && p + 1 >= size, s->embedding);
    if (reaches_end) {
      sampled.push_back({by_seq_.at(s), rows, sc.n_draft});
      rows += 1 + sc.n_draft;
    }
    stats_.tokens_computed += static_cast<uint64_t>(sc.n_tokens);
    if (s->n_computed < s->n_prompt)
      stats_.prompt_tokens_computed +=
          static_cast<uint64_t>(std::min(end, s->n_prompt) - s->n_computed);
  }
  std::span<const float> logits;
  if (mask_prefetch_) {  // the masks of the constrained samples, during the forward pass
    std::vector<SampleOutput*> constrained;
    for (const Sampled& sd : sampled)
      if (sd.st->out.constrained() && !sd.st->done) constrained.push_back(&sd.st->out);
    mask_prefetch_->start(std::move(constrained));
  }
  timer_.lap(StepPhase::kInputs);
  try {
    // Copy-on-write copies first (on a GPU they can fail like the forward pass).
    for (const auto& c : out.copies) kv_->storage().copy_block(c.src, c.dst, c.group);
    // The blocks the next step's allocations would evict go to the host tier
    // while the pass runs (PrefixTier::copy_ahead): a step's worth, at most
    // a block per sequence and the prompt tokens' blocks.
    if (host_tier_)
      kvm.copy_ahead(
          config_.scheduler.max_num_seqs +
          (config_.scheduler.max_batched_tokens + config_.block_size - 1) / config_.block_size);
    kvm.start_restores();  // blocks of sequences that wait for the next step
    const auto forward_start = std::chrono::steady_clock::now();
    logits = model_.forward(batch_, kv_->storage(), pool_);
    const double forward_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count();
    kvm.complete_restores();
    kvm.copy_ahead_wait();
    // The tiers' restore-or-recompute rule needs the prefill rate.
    if (PrefixTier* tier = tier_chain_head(host_tier_, disk_tier_);
        tier && std::any_of(out.scheduled.begin(), out.scheduled.end(), [](const ScheduledSeq& sc) {
          return sc.seq->n_computed < sc.seq->n_prompt;
        }))
      tier->prefilled(static_cast<double>(batch_.n_tokens()), forward_seconds);
  } catch (const std::exception& e) {
    if (mask_prefetch_) mask_prefetch_->wait();  // it owns the samples' grammar states till then
    kvm.complete_restores();
    kvm.copy_ahead_wait();
    // Nothing of this step is committed; the batch's requests end with the
    // error, and checkpoints it was to save are forgotten.
    if (StateCheckpoints* c = kv_->checkpoints())
      for (const auto& [src, dst] : batch_.state_saves)
        if (dst >= c->first_slot()) c->drop(dst);
    const std::string error = describe_failure(e, "the forward pass");
    for (const auto& sc : out.scheduled) fail_request(*by_seq_.at(sc.seq)->req, error);
    drop_finished_requests();
    return true;
  }
  timer_.lap(StepPhase::kForward);
  if (mask_prefetch_) mask_prefetch_->wait();
  timer_.lap(StepPhase::kMaskWait);
  scheduler_->update_after_step(out);
  save_checkpoints(out);
  ++stats_.steps;
  // Embeddings: their rows pooled; one whose every position is in ends with its vector.
  const std::span<const float> hidden = model_.hidden_rows();
  for (const Pooled& pd : pooled) {
    SeqState& st = *pd.st;
    if (st.done) continue;
    try {
      st.pooler->add(pd.pos, hidden.data() + pd.row * model_.hparams().n_embd, pd.n);
      if (st.pooler->complete()) {
        st.embedding = st.pooler->result();
        finish_seq(st, FinishReason::kStop);
      }
    } catch (const std::exception& e) {
      fail_request(*st.req, describe_failure(e, "pooling"));
    }
  }

  // Which sequences draw from which row: forks made and faults injected
  // here, on the engine thread.
  const int64_t V = model_.hparams().n_vocab;
  draws_.clear();
  for (const Sampled& sd : sampled) {
    SeqState& st = *sd.st;
    if (st.done) continue;
    const float* row = logits.data() + sd.row * V;
    if (st.seq->n_generated() == 0 && st.index == 0)
      stats_.cached_prompt_tokens += static_cast<uint64_t>(st.seq->n_cached_prompt);
    // Failures here are kept in the draws (in the order the draws would have
    // been emitted), as the draws' own are.
    try {
      if (st.req->req.n > 1 && st.req->seqs.size() == 1) {
        // End of a shared prompt: the other samples fork here and draw from the same logits.
        fork_samples(st);
        for (auto& sib : st.req->seqs) add_draw(*sib, row);
      } else {
        add_draw(st, row);
      }
    } catch (const std::exception& e) {
      fail_request(*st.req, describe_failure(e, "sampling"));
    }
  }
  timer_.skip();
  sample_all(draws_);
  timer_.lap(StepPhase::kSample);
  for (Draw& d : draws_) {
    SeqState& st = *d.st;
    if (st.done) continue;  // a sibling's draw failed the request
    try {
      if (d.failed)
        fail_request(*st.req, d.error.empty() ? "out of memory during sampling" : d.error);
      else
        emit(st, d.token);
    } catch (const std::exception& e) {
      fail_request(*st.req, describe_failure(e, "sampling"));
    }
  }
  for (const Sampled& sd : sampled)
    if (sd.n_draft > 0) verify_drafts(*sd.st, logits.data() + sd.row * V, sd.n_draft);
  drop_finished_requests();
  timer_.lap(StepPhase::kOutput);
  timer_.end(decode_step, out.scheduled.size(), step_profile_);
  // A step whose every token got logits (decodes and drafts): its time by rows.
  if (proposer_ && rows == batch_.n_tokens())
    step_cost_.record(rows, step_seconds_ ? step_seconds_(rows)
                                          : std::chrono::duration<double>(
                                                std::chrono::steady_clock::now() - step_start)
                                                .count());
  return true;
}

int32_t Engine::restore_point(const Sequence& s) {
  // match_prefix kept blocks up to a checkpoint: its state continues there.
  StateCheckpoints* c = kv_->checkpoints();
  const auto block = static_cast<size_t>(s.n_computed / s.blocks.block_size());
  std::optional<int32_t> slot;
  if (c && block > 0 && block <= s.blocks.hashes().size())
    slot = c->find(s.blocks.hashes()[block - 1],
                   std::span(s.tokens).first(static_cast<size_t>(s.n_computed)));
  if (!slot) throw Error(fmt::format("no recurrent state checkpoint at position {}", s.n_computed));
  c->count_restore();
  return *slot;
}

void Engine::save_checkpoints(const SchedulerOutput& out) {
  // A prompt that just reached a checkpoint position: its state there is
  // copied into a checkpoint before the next step moves it on (or frees it).
  StateCheckpoints* c = kv_->checkpoints();
  if (!c) return;
  for (const ScheduledSeq& sc : out.scheduled) {
    const Sequence& s = *sc.seq;
    const int64_t p = s.n_computed;
    const auto block = static_cast<size_t>(p / s.blocks.block_size());
    if (s.state_slot < 0 || p == 0 || p > s.n_prompt ||
        (p % c->interval() != 0 && p != s.checkpoint_at) || block > s.blocks.hashes().size())
      continue;
    const uint64_t hash = s.blocks.hashes()[block - 1];
    const auto prefix = std::span(s.tokens).first(static_cast<size_t>(p));
    if (!c->contains(hash, prefix))
      state_saves_.emplace_back(s.state_slot, c->store(hash, prefix, p == s.checkpoint_at));
  }
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.running = static_cast<int32_t>(scheduler_->running().size());
  s.waiting = static_cast<int32_t>(scheduler_->waiting().size());
  s.blocks = kv_->manager().allocator().stats();
  if (disk_tier_) {
    s.disk_tier = true;
    s.disk = disk_tier_->stats();
  }
  if (host_tier_) {
    s.host_tier = true;
    s.host = host_tier_->stats();
  }
  s.restores_overlapped = kv_->manager().restores_overlapped();
  s.preemptions = scheduler_->total_preemptions();
  s.admission_paused = scheduler_->admission_paused();
  s.kv_pool = kv_->storage().pool_bytes_by_device();
  if (const ElasticPool* ep = kv_->elastic_pool()) {
    s.elastic_pool = true;
    s.pool = ep->stats();
  }
  for (const Sequence* seq : scheduler_->running()) {
    s.slots_allocated += seq->blocks.capacity_tokens();
    s.tokens_stored += std::min<int64_t>(seq->n_computed, seq->blocks.capacity_tokens());
  }
  auto add = [&s](const Sequence* seq, bool running) {
    s.sequences.push_back({seq->id, seq->n_prompt, static_cast<int64_t>(seq->tokens.size()),
                           seq->n_computed, seq->max_total, running});
  };
  for (const Sequence* seq : scheduler_->running()) add(seq, true);
  for (const Sequence* seq : scheduler_->waiting()) add(seq, false);
  return s;
}

}  // namespace pagellm
