#include "kvcache/block_table.h"

namespace pagellm {

int32_t BlockTable::blocks_needed(int64_t n_tokens) const {
  int64_t need = (n_tokens + block_size_ - 1) / block_size_ - static_cast<int64_t>(blocks_.size());
  return need > 0 ? static_cast<int32_t>(need) : 0;
}

bool BlockTable::reserve(BlockAllocator& alloc, int64_t n_tokens) {
  return alloc.allocate(blocks_needed(n_tokens), blocks_);
}

void BlockTable::release(BlockAllocator& alloc) {
  for (int32_t id : blocks_) alloc.release(id);
  blocks_.clear();
  hashes_.clear();
}

}  // namespace pagellm
