#include "engine/draft_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/sampler.h"
#include "util/error.h"

namespace pagellm {

DraftModelProposer::DraftModelProposer(std::unique_ptr<ModelRunner> model, ThreadPool& pool,
                                       DraftModelConfig config, int32_t target_n_vocab)
    : model_(std::move(model)), pool_(pool), config_(config) {
  const auto& hp = model_->hparams();
  if (hp.n_vocab != target_n_vocab)
    throw ConfigError(fmt::format(
        "the draft model's vocabulary has {} tokens but the model's has {}: a draft model must "
        "share the model's vocabulary",
        hp.n_vocab, target_n_vocab));
  if (config_.num_blocks <= 0 || config_.max_seqs <= 0 || config_.max_batched_tokens <= 0)
    throw ConfigError("the draft model needs a KV cache, sequences and a token budget");
  // One group of every layer (window layers keep every block too), no
  // prefix cache: each sequence's tokens are its own.
  KvRuntimeConfig kc;
  kc.groups = {{CacheGroupSpec::Kind::kPagedKv, 0, config_.num_blocks}};
  kc.block_size = config_.block_size;
  kc.kv_type = config_.kv_type;
  kc.prefix_caching = false;
  kc.workspace_tokens = config_.max_batched_tokens;
  kc.workspace_rows = config_.max_seqs;
  kv_ = std::make_unique<KvRuntime>(*model_, kc);
}

DraftModelProposer::~DraftModelProposer() {
  for (auto& [id, d] : seqs_) kv_->manager().free(d.blocks);
}

void DraftModelProposer::release(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  kv_->manager().free(it->second.blocks);
  seqs_.erase(it);
}

bool DraftModelProposer::make_room(DraftSeq& d, int64_t from, int64_t to,
                                   std::span<const DraftWant> wants) {
  std::vector<BlockCopy> copies;  // nothing is shared in this cache
  while (!kv_->manager().reserve(d.blocks, from, to, copies)) {
    // Evict the least recently drafted sequence that is not in this step.
    auto victim = seqs_.end();
    for (auto it = seqs_.begin(); it != seqs_.end(); ++it) {
      if (&it->second == &d || it->second.blocks.blocks().empty()) continue;
      const bool wanted = std::any_of(wants.begin(), wants.end(),
                                      [&](const DraftWant& w) { return w.seq_id == it->first; });
      if (wanted) continue;
      if (victim == seqs_.end() || it->second.last_used < victim->second.last_used) victim = it;
    }
    if (victim == seqs_.end()) return false;
    kv_->manager().free(victim->second.blocks);
    victim->second.cached.clear();
  }
  for (const BlockCopy& c : copies) kv_->storage().copy_block(c.src, c.dst, c.group);
  return true;
}

void DraftModelProposer::propose(std::span<const DraftWant> wants) {
  std::vector<Active> active;
  const int64_t max_len = model_->hparams().n_ctx_train;
  ++clock_;
  for (const DraftWant& w : wants) {
    w.out->clear();
    if (w.k <= 0 || static_cast<int32_t>(active.size()) >= config_.max_seqs) continue;
    const int64_t size = static_cast<int64_t>(w.tokens.size());
    auto [it, fresh] = seqs_.try_emplace(w.seq_id, config_.block_size);
    DraftSeq& d = it->second;
    d.last_used = clock_;
    // Keep only what still agrees with the sequence: the rest was rejected.
    const auto mismatch =
        std::mismatch(d.cached.begin(), d.cached.end(), w.tokens.begin(), w.tokens.end());
    const int64_t common = mismatch.first - d.cached.begin();
    if (common < static_cast<int64_t>(d.cached.size())) {
      d.cached.resize(static_cast<size_t>(common));
      kv_->manager().truncate(d.blocks, common);
    }
    // Positions up to size + k - 2 get K/V: the sequence and all drafts but the last.
    const int64_t end = size + w.k - 1;
    if (end > max_len || !make_room(d, common, end, wants)) {
      kv_->manager().free(d.blocks);
      d.cached.clear();
      continue;
    }
    active.push_back({&d, &w});
  }
  if (!active.empty()) run(active);
}

void DraftModelProposer::run(std::vector<Active>& active) {
  const int64_t V = model_->hparams().n_vocab;
  // Catch-up: the sequence's tokens that the draft cache lacks, in passes of
  // at most max_batched_tokens; the pass with a sequence's last token gives
  // its first draft.
  for (;;) {
    batch_.clear();
    int64_t budget = config_.max_batched_tokens;
    std::vector<Active*> finishing;
    std::vector<std::pair<Active*, int64_t>> ran;
    for (Active& a : active) {
      DraftSeq& d = *a.seq;
      const auto& tokens = a.want->tokens;
      const int64_t from = static_cast<int64_t>(d.cached.size());
      const int64_t size = static_cast<int64_t>(tokens.size());
      if (from >= size || budget == 0) continue;
      const int64_t n = std::min(size - from, budget);
      const int32_t idx = batch_.add_sequence(d.blocks);
      for (int64_t p = from; p < from + n; ++p)
        batch_.add_token(idx, tokens[static_cast<size_t>(p)], static_cast<int32_t>(p), p + 1 == size);
      budget -= n;
      ran.push_back({&a, n});
      if (from + n == size) finishing.push_back(&a);
    }
    if (ran.empty()) break;
    const auto logits = model_->forward(batch_, kv_->storage(), pool_);
    for (auto [a, n] : ran) {
      DraftSeq* d = a->seq;
      const auto& tokens = a->want->tokens;
      const size_t from = d->cached.size();
      d->cached.insert(d->cached.end(), tokens.begin() + static_cast<int64_t>(from),
                       tokens.begin() + static_cast<int64_t>(from) + n);
    }
    for (size_t r = 0; r < finishing.size(); ++r)
      finishing[r]->want->out->push_back(first_argmax(logits.data() + static_cast<int64_t>(r) * V, V));
  }
  // Then one token at a time: each draft's K/V, and the next draft from its logits.
  for (;;) {
    batch_.clear();
    std::vector<Active*> stepping;
    for (Active& a : active) {
      auto& out = *a.want->out;
      if (out.empty() || static_cast<int32_t>(out.size()) >= a.want->k) continue;
      DraftSeq& d = *a.seq;
      const int32_t idx = batch_.add_sequence(d.blocks);
      batch_.add_token(idx, out.back(), static_cast<int32_t>(d.cached.size()), true);
      stepping.push_back(&a);
    }
    if (stepping.empty()) break;
    const auto logits = model_->forward(batch_, kv_->storage(), pool_);
    for (size_t r = 0; r < stepping.size(); ++r) {
      auto& out = *stepping[r]->want->out;
      stepping[r]->seq->cached.push_back(out.back());
      out.push_back(first_argmax(logits.data() + static_cast<int64_t>(r) * V, V));
    }
  }
}

}  // namespace pagellm
