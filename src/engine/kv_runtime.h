// The caches a model keeps between steps, built in one place for the engine,
// the draft model, perplexity and every pipeline rank: the block manager
// (block tables, prefix cache, one allocator per group), the storage (each
// device's pools, in the memory of the backend that runs its layers) and the
// model's step workspace, reserved up front so that no step allocates.
//
// The caches are a list of groups, each a set of the model's layers with its
// own kind and size. Today every group is paged KV (group 0 the
// full-attention layers, then one per sliding window, kvcache/kv_group.h). A
// new kind (e.g. a per-sequence recurrent-state slot pool) is a new
// CacheGroupSpec::Kind: the planner sizes it, cache_groups() lists it, and
// KvRuntime builds its storage beside the paged groups.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kvcache/elastic_pool.h"
#include "kvcache/kv_cache_manager.h"
#include "kvcache/kv_cache_storage.h"
#include "model/runner.h"
#include "planner/state_checkpoint_plan.h"

namespace pagellm {

struct CacheGroupSpec {
  enum class Kind { kPagedKv };
  Kind kind = Kind::kPagedKv;
  int32_t window = 0;      // paged KV: 0 full attention, else the sliding window
  int32_t num_blocks = 0;  // paged KV: blocks of the group's pools
};

struct KvRuntimeConfig {
  std::vector<CacheGroupSpec> groups;  // group 0 first
  int32_t block_size = 16;
  DType kv_type = DType::F16;
  bool prefix_caching = true;
  // The model's workspace for steps of up to this many tokens and logit rows
  // (0: reserved by whoever runs the model).
  int64_t workspace_tokens = 0;
  int64_t workspace_rows = 0;
  // Models with recurrent layers: sequences whose state is kept at once.
  int32_t state_slots = 0;
  // Their prefix cache keeps recurrent-state checkpoints (kvcache/
  // state_checkpoints.h): one every `checkpoint_tokens` tokens (0: the
  // planner's rule, plan_state_checkpoints; else a multiple of 64 and of the
  // block size), `checkpoints` of them (-1: the rule; 0: no prefix caching).
  int32_t checkpoint_tokens = 0;
  int32_t checkpoints = -1;
  // The longest sequence (the rule's checkpoint count; 0: the cache's tokens).
  int64_t max_seq_len = 0;
  // Group 0's host pools populate by chunks as blocks are needed, and can
  // give chunks back (kvcache/elastic_pool.h); false: populated whole at start.
  bool elastic = false;
  ElasticPoolOptions elastic_options;
};

// One group per group of `groups` (the model's, ModelRunner::kv_groups()),
// with group_blocks[g] blocks; `groups` with fewer than two groups, or
// `by_window` false: one group of every layer with group_blocks[0] blocks.
std::vector<CacheGroupSpec> cache_groups(const KvGroups& groups,
                                         const std::vector<int32_t>& group_blocks,
                                         bool by_window = true);

class KvRuntime {
 public:
  // Allocates every pool on the devices of model.placements() and reserves
  // the workspace. Throws ConfigError when the groups do not match the
  // model's (window groups of another model) or a group has no blocks.
  KvRuntime(ModelRunner& model, KvRuntimeConfig config);

  KvCacheManager& manager() { return *manager_; }
  const KvCacheManager& manager() const { return *manager_; }
  KvCacheStorage& storage() { return *storage_; }
  // The elastic pool (null: the pools are populated whole).
  ElasticPool* elastic_pool() { return elastic_.get(); }
  const ElasticPool* elastic_pool() const { return elastic_.get(); }
  const KvRuntimeConfig& config() const { return config_; }
  // Blocks of each group, group 0 first (what a pipeline rank's steps may name).
  std::vector<int32_t> group_blocks() const;

  // Recurrent layers' state slots: one per running sequence. acquire() takes
  // a free one (to be zeroed before its first step), -1 when none is free.
  int32_t acquire_state_slot();
  // Gives `slot` back (a no-op for -1) and sets it to -1: the holder has none.
  void release_state_slot(int32_t& slot);
  // Every slot of the state pools: the sequences' and the checkpoints' (0: no recurrent layers).
  int32_t state_slot_count() const { return state_slot_count_; }
  // The prefix cache's state checkpoints (null: none; slots past the sequences').
  StateCheckpoints* checkpoints() { return checkpoints_.get(); }
  const StateCheckpoints* checkpoints() const { return checkpoints_.get(); }

 private:
  // The checkpoints' interval and count for a cache of `num_blocks` blocks.
  StateCheckpointPlan checkpoint_plan(const ModelRunner& model, int64_t max_seq_len) const;

  KvRuntimeConfig config_;
  std::unique_ptr<KvCacheManager> manager_;
  std::unique_ptr<KvCacheStorage> storage_;
  std::unique_ptr<ElasticPool> elastic_;  // after storage_ and manager_: it uses both
  int32_t state_slots_ = 0;
  int32_t state_slot_count_ = 0;
  std::vector<int32_t> free_slots_;  // a stack: the lowest slot on top
  std::unique_ptr<StateCheckpoints> checkpoints_;
};

}  // namespace pagellm
