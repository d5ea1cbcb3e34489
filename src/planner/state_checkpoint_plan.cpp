#include "planner/state_checkpoint_plan.h"

#include <algorithm>
#include <numeric>

#include "backend/recurrent_args.h"

namespace pagellm {

StateCheckpointPlan plan_state_checkpoints(uint64_t state_bytes, uint64_t kv_bytes_per_token,
                                           int32_t block_size, int64_t max_seq_len) {
  StateCheckpointPlan p;
  const int64_t chunk = std::lcm<int64_t>(kGatedDeltaChunk, std::max(block_size, 1));
  const uint64_t chunk_kv = kv_bytes_per_token * static_cast<uint64_t>(chunk);
  const uint64_t chunks = chunk_kv > 0 ? std::max<uint64_t>(1, (state_bytes + chunk_kv - 1) / chunk_kv) : 1;
  p.interval = static_cast<int32_t>(std::min<uint64_t>(chunks * static_cast<uint64_t>(chunk), 1u << 30));
  p.entries = static_cast<int32_t>(
      std::clamp<int64_t>((std::max<int64_t>(max_seq_len, 0) + p.interval - 1) / p.interval, 1, 1 << 16));
  return p;
}

}  // namespace pagellm
