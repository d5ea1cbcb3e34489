#include "kvcache/kv_cache_manager.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"

namespace pagellm {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool prefix_caching,
                               std::vector<KvWindowGroup> window_groups)
    : block_size_(block_size),
      prefix_caching_(prefix_caching && window_groups.empty()),
      alloc_(num_blocks),
      windows_(std::move(window_groups)) {
  if (block_size != 8 && block_size != 16 && block_size != 32)
    throw ConfigError(fmt::format("block size {} is not supported (8, 16 or 32)", block_size));
  for (const auto& w : windows_) {
    if (w.window <= 0 || w.num_blocks < 0)
      throw ConfigError(fmt::format("invalid KV window group: window {}, {} blocks", w.window,
                                    w.num_blocks));
    window_allocs_.push_back(std::make_unique<BlockAllocator>(w.num_blocks));
  }
}

BlockAllocator& KvCacheManager::allocator(int32_t group) {
  return group == 0 ? alloc_ : *window_allocs_.at(static_cast<size_t>(group - 1));
}

const BlockAllocator& KvCacheManager::allocator(int32_t group) const {
  return group == 0 ? alloc_ : *window_allocs_.at(static_cast<size_t>(group - 1));
}

int32_t KvCacheManager::num_used_all() const {
  int32_t n = alloc_.num_used();
  for (const auto& a : window_allocs_) n += a->num_used();
  return n;
}

void KvCacheManager::drop_out_of_window(BlockTable& table, int64_t next) {
  for (int32_t g = 1; g < table.n_groups(); ++g) {
    const int64_t first_seen = next - window(g) + 1;
    if (first_seen <= 0) continue;
    auto& blocks = table.group_blocks(g);
    // Dropped blocks form a prefix: walk back from the last droppable one.
    const int64_t n = std::min<int64_t>(first_seen / block_size_, static_cast<int64_t>(blocks.size()));
    for (int64_t i = n - 1; i >= 0 && blocks[static_cast<size_t>(i)] != BlockTable::kNoBlock; --i) {
      allocator(g).release(blocks[static_cast<size_t>(i)]);
      blocks[static_cast<size_t>(i)] = BlockTable::kNoBlock;
    }
  }
}

int64_t KvCacheManager::match_prefix(std::span<const int32_t> tokens, BlockTable& table,
                                     PrefixLookups* lookups) {
  if (!prefix_caching_ || !table.blocks().empty()) return 0;
  PrefixLookups l;
  if (checkpoints_) {
    l = match_to_checkpoint(tokens, table);
  } else {
    const int64_t n = static_cast<int64_t>(tokens.size());
    uint64_t parent = 0;
    // Leave at least the last token to compute: its logits are needed.
    for (int64_t covered = 0; covered + block_size_ <= n - 1; covered += block_size_) {
      auto blk = tokens.subspan(static_cast<size_t>(covered), static_cast<size_t>(block_size_));
      const uint64_t h = BlockAllocator::chain_hash(parent, blk);
      ++l.queries;
      auto id = alloc_.find(h, blk);
      if (id) {
        alloc_.retain(*id);
      } else {
        id = from_tier(table, blk);
        if (!id) break;
        alloc_.set_hash(*id, h, blk);
      }
      ++l.hits;
      ++l.found;
      table.append_block(*id);
      table.hashes().push_back(h);
      parent = h;
    }
  }
  if (lookups)
    *lookups = l;
  else
    alloc_.count_lookups(l.queries, l.hits);
  return static_cast<int64_t>(l.hits) * block_size_;
}

void KvCacheManager::set_prefix_tier(PrefixTier* tier) {
  tier_ = tier;
  if (tier)
    alloc_.set_evict_hook(
        [tier](int32_t id, std::span<const int32_t> tokens) { tier->evicted(id, tokens); });
  else
    alloc_.set_evict_hook({});
}

void KvCacheManager::prefetch(uint64_t owner, std::span<const int32_t> tokens) {
  if (!tier_ || !prefix_caching_ || checkpoints_) return;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t full = std::max<int64_t>(n - 1, 0) / block_size_ * block_size_;
  uint64_t hash = 0;
  int32_t parent = -1;
  int64_t covered = 0;
  for (; covered < full; covered += block_size_) {  // what the pool holds now
    auto blk = tokens.subspan(static_cast<size_t>(covered), static_cast<size_t>(block_size_));
    const uint64_t h = BlockAllocator::chain_hash(hash, blk);
    auto id = alloc_.find(h, blk);
    if (!id) break;
    parent = *id;
    hash = h;
  }
  if (covered < full)
    tier_->prefetch(owner, parent,
                    tokens.subspan(static_cast<size_t>(covered), static_cast<size_t>(full - covered)), 0);
}

void KvCacheManager::forget_prefetch(uint64_t owner) {
  if (tier_) tier_->forget_prefetch(owner);
}

void KvCacheManager::copy_ahead(int32_t n) {
  if (!tier_ || n <= 0) return;
  std::vector<int32_t> blocks;
  alloc_.next_evictions(n, blocks);
  if (blocks.empty()) return;
  std::vector<std::span<const int32_t>> tokens;
  tokens.reserve(blocks.size());
  for (int32_t b : blocks) tokens.push_back(alloc_.block_tokens(b));
  tier_->copy_ahead(blocks, tokens);
}

void KvCacheManager::copy_ahead_wait() {
  if (tier_) tier_->copy_ahead_wait();
}

std::optional<int32_t> KvCacheManager::from_tier(const BlockTable& table,
                                                 std::span<const int32_t> tokens) {
  if (!tier_ || !alloc_.ensure_free(1)) return std::nullopt;
  const int32_t parent = table.blocks().empty() ? -1 : table.blocks().back();
  if (!tier_->fetch(parent, tokens)) return std::nullopt;
  std::vector<int32_t> got;
  if (!alloc_.allocate(1, got)) return std::nullopt;
  if (PrefixTier::RestoreCopy copy = tier_->place(got[0]); copy) {
    if (defer_restores_) {
      pending_blocks_.push_back(got[0]);
      pending_copies_.push_back(std::move(copy));
    } else {
      copy();
      tier_->restores_done();
    }
  }
  return got[0];
}

bool KvCacheManager::restoring(const BlockTable& table) const {
  if (pending_blocks_.empty()) return false;
  for (int32_t b : table.blocks())
    if (std::find(pending_blocks_.begin(), pending_blocks_.end(), b) != pending_blocks_.end())
      return true;
  return false;
}

void KvCacheManager::start_restores() {
  if (pending_copies_.empty() || restores_running_) return;
  auto run = [this] {
    for (auto& copy : pending_copies_) copy();
  };
  restores_running_ = restore_worker_.start(run);
  if (restores_running_) restores_overlapped_ += pending_copies_.size();
}

void KvCacheManager::complete_restores() {
  if (pending_blocks_.empty()) return;
  if (restores_running_)
    restore_worker_.wait();
  else
    for (auto& copy : pending_copies_) copy();
  restores_running_ = false;
  pending_copies_.clear();
  pending_blocks_.clear();
  if (tier_) tier_->restores_done();
}

PrefixLookups KvCacheManager::match_to_checkpoint(std::span<const int32_t> tokens,
                                                  BlockTable& table) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<std::pair<int32_t, uint64_t>> found;  // (block, chained hash)
  PrefixLookups l;
  size_t keep = 0;
  for (int64_t covered = 0; covered + block_size_ <= n - 1; covered += block_size_) {
    auto blk = tokens.subspan(static_cast<size_t>(covered), static_cast<size_t>(block_size_));
    const uint64_t h = BlockAllocator::chain_hash(found.empty() ? 0 : found.back().second, blk);
    ++l.queries;
    auto id = alloc_.find(h, blk);
    if (!id) break;
    found.emplace_back(*id, h);
    if (checkpoints_->contains(h, tokens.first(static_cast<size_t>(covered + block_size_))))
      keep = found.size();
  }
  for (size_t i = 0; i < keep; ++i) {
    alloc_.retain(found[i].first);
    table.append_block(found[i].first);
    table.hashes().push_back(found[i].second);
  }
  l.hits = keep;
  l.found = found.size();
  return l;
}

bool KvCacheManager::reserve(BlockTable& table, int64_t write_from, int64_t n_tokens,
                             std::vector<BlockCopy>& copies) {
  if (n_tokens <= write_from) return true;
  if (table.n_groups() < n_groups()) table.set_groups(n_groups());
  drop_out_of_window(table, write_from);
  const int32_t G = n_groups();
  const int64_t first = write_from / block_size_;
  const int64_t want = (n_tokens + block_size_ - 1) / block_size_;
  // Every allocation that can throw happens before the first block is taken,
  // so a failure (out of memory) leaves the tables and allocators as they
  // were; so does a group without enough free blocks (all or nothing).
  std::vector<std::vector<size_t>> shared(static_cast<size_t>(G));
  std::vector<std::vector<int32_t>> fresh(static_cast<size_t>(G));
  for (int32_t g = 0; g < G; ++g) {
    auto& blocks = table.group_blocks(g);
    const int64_t existing = static_cast<int64_t>(blocks.size());
    auto& sh = shared[static_cast<size_t>(g)];
    for (int64_t i = first; i < existing; ++i)
      if (allocator(g).block(blocks[static_cast<size_t>(i)]).ref_count > 1)
        sh.push_back(static_cast<size_t>(i));
    const int64_t grow = std::max<int64_t>(0, want - existing);
    const int64_t take = grow + static_cast<int64_t>(sh.size());
    // An elastic pool may grow here.
    if (!allocator(g).ensure_free(static_cast<int32_t>(take))) return false;
    fresh[static_cast<size_t>(g)].reserve(static_cast<size_t>(take));
    blocks.reserve(static_cast<size_t>(std::max(existing, want)));
    copies.reserve(copies.size() + sh.size());
  }
  for (int32_t g = 0; g < G; ++g) {
    auto& got = fresh[static_cast<size_t>(g)];
    const auto& sh = shared[static_cast<size_t>(g)];
    auto& blocks = table.group_blocks(g);
    const int64_t grow = std::max<int64_t>(0, want - static_cast<int64_t>(blocks.size()));
    if (!allocator(g).allocate(static_cast<int32_t>(grow + static_cast<int64_t>(sh.size())), got))
      throw Error("KV cache: free blocks vanished during a reservation");
    size_t k = 0;
    for (size_t idx : sh) {
      const int32_t old = blocks[idx];
      copies.push_back({old, got[k], g});
      blocks[idx] = got[k++];
      allocator(g).release(old);  // still held by the other sharer(s)
      if (g == 0 && idx < table.hashes().size()) table.hashes().resize(idx);
    }
    for (; k < got.size(); ++k) blocks.push_back(got[k]);
  }
  return true;
}

void KvCacheManager::commit(std::span<const int32_t> tokens, BlockTable& table,
                            int64_t n_computed) {
  drop_out_of_window(table, n_computed);
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
    if (tier_) tier_->committed(table.blocks()[i], i ? table.blocks()[i - 1] : -1, blk);
    hashes.push_back(h);
  }
}

void KvCacheManager::truncate(BlockTable& table, int64_t n_tokens) {
  const size_t keep = static_cast<size_t>((std::max<int64_t>(n_tokens, 0) + block_size_ - 1) /
                                          block_size_);
  for (int32_t g = 0; g < table.n_groups(); ++g) {
    auto& blocks = table.group_blocks(g);
    while (blocks.size() > keep) {
      if (blocks.back() != BlockTable::kNoBlock) allocator(g).release(blocks.back());
      blocks.pop_back();
    }
  }
  if (table.hashes().size() > keep) table.hashes().resize(keep);
}

void KvCacheManager::fork(const BlockTable& parent, BlockTable& child) {
  if (!child.blocks().empty()) throw Error("fork into a sequence that has blocks");
  child.set_groups(parent.n_groups());
  for (int32_t g = 0; g < parent.n_groups(); ++g) {
    child.group_blocks(g) = parent.blocks(g);
    for (int32_t id : parent.blocks(g))
      if (id != BlockTable::kNoBlock) allocator(g).retain(id);
  }
  child.hashes() = parent.hashes();
}

void KvCacheManager::free(BlockTable& table) {
  if (restoring(table)) complete_restores();  // the blocks may be reused at once
  for (int32_t g = 1; g < table.n_groups(); ++g) {
    auto& blocks = table.group_blocks(g);
    for (int32_t id : blocks)
      if (id != BlockTable::kNoBlock) allocator(g).release(id);
    blocks.clear();
  }
  table.release(alloc_);
}

}  // namespace pagellm
