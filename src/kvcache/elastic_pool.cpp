#include "kvcache/elastic_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "util/error.h"
#include "util/sizes.h"

namespace pagellm {

int32_t ElasticPool::chunk_blocks_for(size_t target, size_t block_bytes, int32_t unit) {
  const size_t units = std::max<size_t>(
      1, (target / std::max<size_t>(block_bytes, 1) + static_cast<size_t>(unit) / 2) /
             static_cast<size_t>(unit));
  return static_cast<int32_t>(std::min<size_t>(units * static_cast<size_t>(unit), INT32_MAX / 2));
}

ElasticPool::ElasticPool(KvCacheStorage& storage, BlockAllocator& alloc, ElasticPoolOptions options)
    : storage_(storage), alloc_(alloc), options_(std::move(options)) {
  // Each layer's range of a chunk starts on a page when its blocks' bytes
  // add up to whole pages: a multiple of `unit` blocks (a power of two).
  int32_t unit = 1;
  for (const auto& p : storage_.pools()) {
    if (!p->elastic()) continue;
    block_bytes_ += p->block_bytes_all_layers();
    const size_t range = static_cast<size_t>(p->shape().block_size) * p->shape().slot_bytes();
    const size_t page = p->elastic_granularity();
    unit = std::max(unit, static_cast<int32_t>(page / std::gcd(range, page)));
  }
  if (block_bytes_ == 0) throw Error("elastic KV pool without elastic pools");
  const int32_t blocks = chunk_blocks_for(options_.chunk_bytes, block_bytes_, unit);
  alloc_.set_chunks(blocks, 1, [this](int32_t c) { return grow(c); });
  for (const auto& p : storage_.pools())
    if (!p->populate_blocks(chunk_begin(0), chunk_end(0) - chunk_begin(0)))
      throw SystemError(
          fmt::format("KV cache: cannot populate its first {}", format_size(chunk_bytes(0))));
}

size_t ElasticPool::chunk_bytes(int32_t c) const {
  return static_cast<size_t>(chunk_end(c) - chunk_begin(c)) * block_bytes_;
}

bool ElasticPool::grow(int32_t c) {
  const auto now = std::chrono::steady_clock::now();
  if (refused_ && now - refused_at_ < options_.retry_after) return false;
  // What the chunk takes in each memory (host RAM, each device's own).
  std::vector<std::pair<std::string, size_t>> takes;
  const size_t blocks = static_cast<size_t>(chunk_end(c) - chunk_begin(c));
  for (const auto& p : storage_.pools()) {
    if (!p->elastic()) continue;
    const std::string memory = storage_.memory_of(*p);
    auto it = std::find_if(takes.begin(), takes.end(), [&](const auto& t) { return t.first == memory; });
    if (it == takes.end()) it = takes.insert(takes.end(), {memory, 0});
    it->second += blocks * p->block_bytes_all_layers();
  }
  bool ok = true;
  std::string short_of = "host";  // for the log line
  try {
    for (const auto& [memory, bytes] : takes)
      if (options_.may_grow && !options_.may_grow(memory, bytes)) {
        ok = false;
        short_of = memory;
        break;
      }
  } catch (const std::exception& e) {
    // An unreadable probe: the plan's size stands (as a pool populated whole).
    if (!probe_failed_)
      std::fprintf(stderr,
                   "pagellm: warning: KV pool: memory check failed: %s (growing as planned)\n",
                   e.what());
    probe_failed_ = true;
  }
  size_t done = 0;
  if (ok) {
    for (const auto& p : storage_.pools()) {
      if (!p->populate_blocks(chunk_begin(c), chunk_end(c) - chunk_begin(c))) {
        ok = false;
        short_of = storage_.memory_of(*p);
        break;
      }
      ++done;
    }
    if (!ok)  // the pools populated before the failing one give theirs back
      for (size_t i = 0; i < done; ++i)
        storage_.pools()[i]->release_blocks(chunk_begin(c), chunk_end(c) - chunk_begin(c));
  }
  if (!ok) {
    refused_ = true;
    refused_at_ = now;
    ++refusals_;
    if (!short_logged_)
      std::fprintf(
          stderr,
          "pagellm: KV pool: not growing past %s of the plan's %s: %s memory is short "
          "(sequences wait or are preempted until it is back)\n",
          format_size(static_cast<size_t>(alloc_.available_blocks()) * block_bytes_).c_str(),
          format_size(static_cast<size_t>(alloc_.num_blocks()) * block_bytes_).c_str(),
          short_of.c_str());
    short_logged_ = true;
    return false;
  }
  refused_ = false;
  short_logged_ = false;
  ++grows_;
  return true;
}

bool ElasticPool::release_top(
    const std::function<void(int32_t, std::span<const int32_t>)>& dropped) {
  const int32_t c = top_chunk();
  if (!alloc_.remove_top_chunk(dropped)) return false;
  for (const auto& p : storage_.pools())
    p->release_blocks(chunk_begin(c), chunk_end(c) - chunk_begin(c));
  ++shrinks_;
  return true;
}

ElasticPoolStats ElasticPool::stats() const {
  ElasticPoolStats s;
  s.chunk_blocks = alloc_.chunk_blocks();
  s.chunks = alloc_.num_chunks();
  s.populated_chunks = alloc_.populated_chunks();
  s.grows = grows_;
  s.shrinks = shrinks_;
  s.refusals = refusals_;
  return s;
}

}  // namespace pagellm
