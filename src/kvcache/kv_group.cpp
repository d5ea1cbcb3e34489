#include "kvcache/kv_group.h"

#include <algorithm>

namespace pagellm {

std::vector<int32_t> KvGroups::layers_of(int32_t group) const {
  std::vector<int32_t> out;
  for (size_t l = 0; l < group_of_layer.size(); ++l)
    if (group_of_layer[l] == group) out.push_back(static_cast<int32_t>(l));
  return out;
}

int32_t KvGroups::n_layers_of(int32_t group) const {
  return static_cast<int32_t>(std::count(group_of_layer.begin(), group_of_layer.end(), group));
}

KvGroups KvGroups::from_layer_windows(const std::vector<int32_t>& layer_windows) {
  KvGroups g;
  g.windows = {0};
  for (int32_t w : layer_windows) {
    if (w <= 0) {
      g.group_of_layer.push_back(0);
      continue;
    }
    auto it = std::find(g.windows.begin() + 1, g.windows.end(), w);
    if (it == g.windows.end()) it = g.windows.insert(g.windows.end(), w);
    g.group_of_layer.push_back(static_cast<int32_t>(it - g.windows.begin()));
  }
  return g;
}

int32_t window_group_blocks(int32_t window, int32_t block_size, int32_t max_num_seqs,
                            int32_t max_batched_tokens, int32_t full_blocks) {
  const int64_t per_seq = (static_cast<int64_t>(window) - 1 + block_size - 1) / block_size + 2;
  const int64_t need = static_cast<int64_t>(max_num_seqs) * per_seq +
                       (static_cast<int64_t>(max_batched_tokens) + block_size - 1) / block_size;
  return static_cast<int32_t>(std::min<int64_t>(need, full_blocks));
}

}  // namespace pagellm
