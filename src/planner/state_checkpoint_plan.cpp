#include "planner/state_checkpoint_plan.h"

#include <algorithm>
#include <numeric>

#include "backend/recurrent_args.h"

namespace pagellm {

StateCheckpointPlan plan_state_checkpoints(uint64_t state_bytes, uint64_t kv_bytes_per_token,
                                           int32_t block_size, int32_t num_blocks) {
  StateCheckpointPlan p;
  const int64_t chunk = std::lcm<int64_t>(kGatedDeltaChunk, std::max(block_size, 1));
  const uint64_t chunk_kv = kv_bytes_per_token * static_cast<uint64_t>(chunk);
  const uint64_t chunks = chunk_kv > 0 ? std::max<uint64_t>(1, (state_bytes + chunk_kv - 1) / chunk_kv) : 1;
  p.interval = static_cast<int32_t>(std::min<uint64_t>(chunks * static_cast<uint64_t>(chunk), 1u << 30));
  const int64_t cache_tokens = static_cast<int64_t>(std::max(num_blocks, 0)) * block_size;
  p.entries = static_cast<int32_t>(std::max<int64_t>(1, (cache_tokens / p.interval + 3) / 4));
  return p;
}

}  // namespace pagellm
