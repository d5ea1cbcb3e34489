// Layers over the nodes of a pipeline (MPI ranks, each with its own memory):
// contiguous stages in rank order, every node at least one layer, each node
// holding its layers' weights, their KV cache for every token of the cache,
// their recurrent state (fixed, whatever the cache), and its workspace,
// within its own budget. The cache is as large as
// any split allows (up to a cap); among the splits that reach it, the one
// whose largest stage (in weight bytes) is smallest, so that the pipeline's
// slowest stage is as fast as it can be. Pure: property-tested against brute
// force (tests/planner/node_split_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pagellm {

struct NodeSplitInput {
  std::vector<uint64_t> layer_weight_bytes;      // per layer
  std::vector<uint64_t> layer_kv_bytes_per_token;  // per layer: K + V of one token
  // Per layer: its recurrent state for every sequence slot (0: an attention
  // layer); empty: no layer has any.
  std::vector<uint64_t> layer_state_bytes;
  std::vector<uint64_t> node_budget;             // per node: free memory minus headroom
  std::vector<uint64_t> node_fixed;              // per node: workspace, embeddings, output head
  int32_t block_size = 16;
  int64_t max_blocks = 0;  // the cap (e.g. max_seq_len x max_num_seqs, in blocks)
  int64_t min_blocks = 1;  // fewer than this: no plan
};

struct NodeSplit {
  std::vector<std::pair<int32_t, int32_t>> stages;  // [begin, end) per node
  int64_t blocks = 0;
  int32_t binding_node = -1;  // a node that cannot hold one more block (-1: the cap binds)
};

// The split, or nullopt when not even min_blocks fit (then `largest_blocks`,
// when given, is the most that fits, -1 if not even the weights do).
std::optional<NodeSplit> split_layers(const NodeSplitInput& in, int64_t* largest_blocks = nullptr);

}  // namespace pagellm
