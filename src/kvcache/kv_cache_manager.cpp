#include "kvcache/kv_cache_manager.h"

#include <fmt/format.h>

#include "util/error.h"

namespace pagellm {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool prefix_caching)
    : block_size_(block_size), prefix_caching_(prefix_caching), alloc_(num_blocks) {
  if (block_size != 8 && block_size != 16 && block_size != 32)
    throw ConfigError(fmt::format("block size {} is not supported (8, 16 or 32)", block_size));
}

int64_t KvCacheManager::match_prefix(std::span<const int32_t> tokens, BlockTable& table) {
  if (!prefix_caching_ || !table.blocks().empty()) return 0;
  const int64_t n = static_cast<int64_t>(tokens.size());
  uint64_t parent = 0;
  int64_t covered = 0;
  // Leave at least the last token to compute: its logits are needed.
  while (covered + block_size_ <= n - 1) {
    auto blk = tokens.subspan(static_cast<size_t>(covered), static_cast<size_t>(block_size_));
    const uint64_t h = BlockAllocator::chain_hash(parent, blk);
    auto id = alloc_.lookup(h, blk);
    if (!id) break;
    alloc_.retain(*id);
    table.append_block(*id);
    table.hashes().push_back(h);
    parent = h;
    covered += block_size_;
  }
  return covered;
}

bool KvCacheManager::reserve(BlockTable& table, int64_t write_from, int64_t n_tokens,
                             std::vector<BlockCopy>& copies) {
  if (n_tokens <= write_from) return true;
  const int64_t first = write_from / block_size_;
  const int64_t existing = static_cast<int64_t>(table.blocks().size());
  std::vector<size_t> shared;
  for (int64_t i = first; i < existing; ++i)
    if (alloc_.block(table.blocks()[static_cast<size_t>(i)]).ref_count > 1)
      shared.push_back(static_cast<size_t>(i));
  const int32_t grow = table.blocks_needed(n_tokens);
  // Every allocation that can throw happens before the first block is taken,
  // so a failure (out of memory) leaves the table and the allocator as they were.
  const int32_t take = grow + static_cast<int32_t>(shared.size());
  std::vector<int32_t> fresh;
  fresh.reserve(static_cast<size_t>(take));
  copies.reserve(copies.size() + shared.size());
  table.reserve_capacity(static_cast<size_t>(existing + grow));
  if (!alloc_.allocate(take, fresh)) return false;
  size_t k = 0;
  for (size_t idx : shared) {
    const int32_t old = table.blocks()[idx];
    copies.push_back({old, fresh[k]});
    table.replace_block(idx, fresh[k++]);
    alloc_.release(old);  // still held by the other sharer(s)
    if (idx < table.hashes().size()) table.hashes().resize(idx);
  }
  for (; k < fresh.size(); ++k) table.append_block(fresh[k]);
  return true;
}

void KvCacheManager::commit(std::span<const int32_t> tokens, BlockTable& table,
                            int64_t n_computed) {
  if (!prefix_caching_) return;
  const int64_t full =
      std::min<int64_t>(n_computed / block_size_, static_cast<int64_t>(table.blocks().size()));
  auto& hashes = table.hashes();
  while (static_cast<int64_t>(hashes.size()) < full) {
    const size_t i = hashes.size();
    auto blk =
        tokens.subspan(i * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = BlockAllocator::chain_hash(i ? hashes[i - 1] : 0, blk);
    alloc_.set_hash(table.blocks()[i], h, blk);
    hashes.push_back(h);
  }
}

void KvCacheManager::fork(const BlockTable& parent, BlockTable& child) {
  if (!child.blocks().empty()) throw Error("fork into a sequence that has blocks");
  for (int32_t id : parent.blocks()) {
    alloc_.retain(id);
    child.append_block(id);
  }
  child.hashes() = parent.hashes();
}

void KvCacheManager::free(BlockTable& table) {
  table.release(alloc_);
}

}  // namespace pagellm
