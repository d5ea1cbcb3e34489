// KV groups: sets of layers that share block tables. Group 0 holds the
// full-attention layers and keeps every block of a sequence; each further
// group holds the layers of one sliding window W, whose tables drop the blocks
// that fell out of the window (a query at position q reads positions
// q-W+1 .. q only), so its pool needs a bounded number of blocks per sequence
// instead of one per block_size tokens of context.
#pragma once

#include <cstdint>
#include <vector>

namespace pagellm {

struct KvGroups {
  std::vector<int32_t> windows;         // per group: 0 for group 0, else its window
  std::vector<int32_t> group_of_layer;  // per layer

  int32_t n_groups() const { return static_cast<int32_t>(windows.size()); }
  std::vector<int32_t> layers_of(int32_t group) const;
  int32_t n_layers_of(int32_t group) const;

  // Group 0 for the layers with window 0 (full attention), one group per
  // distinct window otherwise (in order of first appearance).
  static KvGroups from_layer_windows(const std::vector<int32_t>& layer_windows);
};

// Blocks a window group's pool needs so that it never runs out before group
// 0 does: each running sequence holds the blocks of positions
// [computed - W + 1, computed + n) for a step of n tokens, at most
// (W - 1 + n) / bs + 2 blocks; the step's n add up to max_batched_tokens.
// Never more than group 0's count (a window table holds a subset of its
// positions).
int32_t window_group_blocks(int32_t window, int32_t block_size, int32_t max_num_seqs,
                            int32_t max_batched_tokens, int32_t full_blocks);

}  // namespace pagellm
