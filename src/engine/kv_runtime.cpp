#include "engine/kv_runtime.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/recurrent_args.h"
#include "util/error.h"

namespace pagellm {

std::vector<CacheGroupSpec> cache_groups(const KvGroups& groups,
                                         const std::vector<int32_t>& group_blocks, bool by_window) {
  if (group_blocks.empty()) throw ConfigError("the KV cache needs a block count");
  std::vector<CacheGroupSpec> out = {{CacheGroupSpec::Kind::kPagedKv, 0, group_blocks[0]}};
  if (!by_window) return out;
  for (int32_t g = 1; g < groups.n_groups(); ++g) {
    if (static_cast<size_t>(g) >= group_blocks.size())
      throw ConfigError(fmt::format("KV group {} (window {}) has no block count", g,
                                    groups.windows[static_cast<size_t>(g)]));
    out.push_back({CacheGroupSpec::Kind::kPagedKv, groups.windows[static_cast<size_t>(g)],
                   group_blocks[static_cast<size_t>(g)]});
  }
  return out;
}

KvRuntime::KvRuntime(ModelRunner& model, KvRuntimeConfig config) : config_(std::move(config)) {
  const auto& specs = config_.groups;
  if (specs.empty() || specs[0].window != 0)
    throw ConfigError("the KV cache's first group holds the full-attention layers");
  for (const CacheGroupSpec& s : specs)
    if (s.num_blocks <= 0) throw ConfigError("every KV group needs blocks");
  // Paged KV: window groups share the layout of the model's.
  const KvGroups groups = model.kv_groups();
  const bool by_window = specs.size() > 1;
  std::vector<KvWindowGroup> windows;
  std::vector<int32_t> blocks;
  for (size_t g = 0; g < specs.size(); ++g) {
    if (by_window && (g >= groups.windows.size() || groups.windows[g] != specs[g].window))
      throw ConfigError(fmt::format("KV group {} (window {}) is not one of the model's", g,
                                    specs[g].window));
    if (g > 0) windows.push_back({specs[g].window, specs[g].num_blocks});
    blocks.push_back(specs[g].num_blocks);
  }
  if (by_window && groups.windows.size() != specs.size())
    throw ConfigError(fmt::format("the model has {} KV groups, the cache {}", groups.n_groups(),
                                  specs.size()));
  // A recurrent layer's state after a prefix cannot be rebuilt from cached
  // blocks: such models' prefix cache keeps state checkpoints, in state slots
  // after the sequences' (none: no prefix caching).
  const ModelHParams& hp = model.hparams();
  RecurrentStateSpec states;
  StateCheckpointPlan checkpoints;
  if (hp.has_recurrent()) {
    state_slots_ = std::max(config_.state_slots, 1);
    if (config_.prefix_caching && windows.empty())
      checkpoints = checkpoint_plan(model, config_.max_seq_len > 0
                                               ? config_.max_seq_len
                                               : static_cast<int64_t>(blocks[0]) * config_.block_size);
    if (checkpoints.entries == 0) config_.prefix_caching = false;
    state_slot_count_ = state_slots_ + checkpoints.entries;
    states = model.recurrent_state(state_slot_count_);
    for (int32_t s = state_slots_; s-- > 0;) free_slots_.push_back(s);
  }
  manager_ = std::make_unique<KvCacheManager>(blocks[0], config_.block_size,
                                              config_.prefix_caching, windows);
  if (checkpoints.entries > 0) {
    checkpoints_ = std::make_unique<StateCheckpoints>(state_slots_, checkpoints.entries,
                                                      checkpoints.interval);
    manager_->set_state_checkpoints(checkpoints_.get());
  }
  const ModelRunner& m = model;
  storage_ = std::make_unique<KvCacheStorage>(
      model.kv_shape(blocks[0], config_.block_size, config_.kv_type), model.placements(),
      [&m](const std::string& device) { return m.backend_for_device(device); },
      by_window ? &groups : nullptr, blocks, states, config_.elastic);
  if (config_.elastic &&
      std::any_of(storage_->pools().begin(), storage_->pools().end(),
                  [](const auto& p) { return p->elastic(); }))
    elastic_ = std::make_unique<ElasticPool>(*storage_, manager_->allocator(),
                                             config_.elastic_options);
  if (config_.workspace_tokens > 0)
    model.reserve_workspace(config_.workspace_tokens, config_.workspace_rows);
}

StateCheckpointPlan KvRuntime::checkpoint_plan(const ModelRunner& model, int64_t max_seq_len) const {
  const RecurrentStateSpec one = model.recurrent_state(1);
  const auto n_recurrent = std::count(one.recurrent.begin(), one.recurrent.end(), true);
  const uint64_t state_bytes = static_cast<uint64_t>(n_recurrent) *
                               static_cast<uint64_t>(one.conv_floats + one.delta_floats) * sizeof(float);
  const uint64_t kv_per_token =
      static_cast<uint64_t>(static_cast<int64_t>(one.recurrent.size()) - n_recurrent) *
      model.kv_shape(1, 1, config_.kv_type).layer_bytes();
  StateCheckpointPlan p =
      plan_state_checkpoints(state_bytes, kv_per_token, config_.block_size, max_seq_len);
  if (config_.checkpoint_tokens != 0) {
    const int32_t every = config_.checkpoint_tokens;
    if (every < 0 || every % kGatedDeltaChunk != 0 || every % config_.block_size != 0)
      throw ConfigError(fmt::format(
          "state checkpoints every {} tokens: must be a positive multiple of {} and of the "
          "block size {}",
          every, kGatedDeltaChunk, config_.block_size));
    p.interval = every;
  }
  if (config_.checkpoints >= 0) p.entries = config_.checkpoints;
  return p;
}

int32_t KvRuntime::acquire_state_slot() {
  if (free_slots_.empty()) return -1;
  const int32_t s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

void KvRuntime::release_state_slot(int32_t& slot) {
  if (slot >= 0) free_slots_.push_back(slot);
  slot = -1;
}

std::vector<int32_t> KvRuntime::group_blocks() const {
  std::vector<int32_t> out;
  for (const CacheGroupSpec& s : config_.groups) out.push_back(s.num_blocks);
  return out;
}

}  // namespace pagellm
