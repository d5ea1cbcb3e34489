// How often a hybrid model's prefix cache keeps a recurrent-state checkpoint
// (kvcache/state_checkpoints.h), and how many it keeps. Pure.
//
// A checkpoint costs one sequence's state (every recurrent layer's conv and
// delta state) and lets a prompt reuse the KV blocks before it; a prefix hit
// recomputes up to one interval. The rule balances the two: one checkpoint
// per as many 64-token chunks (the delta-rule kernel's chunk: a state is only
// reproducible at multiples of it) as the state's bytes are worth in KV, so
// the checkpoints cost at most about what the KV they cover does; at least
// one chunk. Entries: one longest sequence's worth (max_seq_len / interval,
// at least one), a count the planner knows before it sizes the cache, so the
// plan charges them exactly.
#pragma once

#include <cstdint>

namespace pagellm {

struct StateCheckpointPlan {
  int32_t interval = 0;  // tokens between checkpoints (multiple of 64 and the block size)
  int32_t entries = 0;   // checkpoints kept (state slots beside the sequences')
};

// state_bytes: one sequence's recurrent state on every device;
// kv_bytes_per_token: one token's K and V over every attention layer.
StateCheckpointPlan plan_state_checkpoints(uint64_t state_bytes, uint64_t kv_bytes_per_token,
                                           int32_t block_size, int64_t max_seq_len);

}  // namespace pagellm
