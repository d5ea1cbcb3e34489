#include "planner/node_split.h"

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace pagellm {

namespace {

constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();

// Per-layer prefix sums: weights, KV per token, recurrent state.
struct Prefixes {
  std::vector<uint64_t> w, kv, state;
};

// Node r holding layers [b, e) with `blocks` of cache: its bytes.
uint64_t node_bytes(const NodeSplitInput& in, const Prefixes& x, size_t r, int32_t b, int32_t e,
                    int64_t blocks) {
  const uint64_t tokens = static_cast<uint64_t>(blocks) * static_cast<uint64_t>(in.block_size);
  return in.node_fixed[r] + (x.w[e] - x.w[b]) + (x.state[e] - x.state[b]) +
         tokens * (x.kv[e] - x.kv[b]);
}

// The split with `blocks` of cache whose largest stage is smallest, if any
// (a DP over nodes x layer boundaries).
std::optional<NodeSplit> best_split(const NodeSplitInput& in, const Prefixes& x, int64_t blocks) {
  const std::vector<uint64_t>& w_prefix = x.w;
  const int32_t L = static_cast<int32_t>(in.layer_weight_bytes.size());
  const size_t R = in.node_budget.size();
  // cost[r][e]: the smallest largest-stage weight over splits of [0, e) onto nodes 0..r.
  std::vector<std::vector<uint64_t>> cost(R, std::vector<uint64_t>(static_cast<size_t>(L) + 1, kNone));
  std::vector<std::vector<int32_t>> from(R, std::vector<int32_t>(static_cast<size_t>(L) + 1, -1));
  for (size_t r = 0; r < R; ++r) {
    // Node r ends at e, leaving a layer for each later node.
    const int32_t max_e = L - static_cast<int32_t>(R - 1 - r);
    for (int32_t e = static_cast<int32_t>(r) + 1; e <= max_e; ++e) {
      for (int32_t b = static_cast<int32_t>(r); b < e; ++b) {
        const uint64_t before = r == 0 ? (b == 0 ? 0 : kNone) : cost[r - 1][static_cast<size_t>(b)];
        if (before == kNone) continue;
        if (node_bytes(in, x, r, b, e, blocks) > in.node_budget[r]) continue;
        const uint64_t c = std::max(before, w_prefix[static_cast<size_t>(e)] - w_prefix[static_cast<size_t>(b)]);
        if (c < cost[r][static_cast<size_t>(e)]) {
          cost[r][static_cast<size_t>(e)] = c;
          from[r][static_cast<size_t>(e)] = b;
        }
      }
    }
  }
  if (cost[R - 1][static_cast<size_t>(L)] == kNone) return std::nullopt;
  NodeSplit s;
  s.blocks = blocks;
  s.stages.resize(R);
  int32_t e = L;
  for (size_t r = R; r-- > 0;) {
    const int32_t b = from[r][static_cast<size_t>(e)];
    s.stages[r] = {b, e};
    e = b;
  }
  return s;
}

}  // namespace

std::optional<NodeSplit> split_layers(const NodeSplitInput& in, int64_t* largest_blocks) {
  const size_t L = in.layer_weight_bytes.size(), R = in.node_budget.size();
  if (R == 0 || in.node_fixed.size() != R || in.layer_kv_bytes_per_token.size() != L ||
      (!in.layer_state_bytes.empty() && in.layer_state_bytes.size() != L) || in.block_size <= 0 ||
      in.max_blocks < 0)
    throw ConfigError("node split: inconsistent input");
  if (L < R) {
    if (largest_blocks) *largest_blocks = -1;
    return std::nullopt;
  }
  Prefixes x{std::vector<uint64_t>(L + 1, 0), std::vector<uint64_t>(L + 1, 0),
             std::vector<uint64_t>(L + 1, 0)};
  for (size_t l = 0; l < L; ++l) {
    x.w[l + 1] = x.w[l] + in.layer_weight_bytes[l];
    x.kv[l + 1] = x.kv[l] + in.layer_kv_bytes_per_token[l];
    x.state[l + 1] = x.state[l] + (in.layer_state_bytes.empty() ? 0 : in.layer_state_bytes[l]);
  }
  // Feasibility only falls as blocks grow: binary search for the most.
  if (!best_split(in, x, 0)) {
    if (largest_blocks) *largest_blocks = -1;
    return std::nullopt;
  }
  int64_t lo = 0, hi = in.max_blocks;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (best_split(in, x, mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  if (largest_blocks) *largest_blocks = lo;
  if (lo < in.min_blocks) return std::nullopt;
  NodeSplit s = *best_split(in, x, lo);
  if (lo < in.max_blocks) {
    // A node that runs out of room for one more block in this split.
    for (size_t r = 0; r < R; ++r)
      if (node_bytes(in, x, r, s.stages[r].first, s.stages[r].second, lo + 1) >
          in.node_budget[r]) {
        s.binding_node = static_cast<int32_t>(r);
        break;
      }
  }
  return s;
}

}  // namespace pagellm
