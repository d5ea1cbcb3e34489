// The engine under memory pressure (Engine's part that watches memory): the
// swap guard's periodic check pauses admission, and with an elastic KV pool
// a shortfall of host memory or of a device's own (a GPU's, a staged
// device's) gives chunks back at once (cached blocks first, then the newest
// sequences holding blocks there are preempted), growing again when memory
// returns.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "engine/engine.h"
#include "util/sizes.h"

namespace pagellm {

void Engine::check_memory() {
  const bool elastic = kv_->elastic_pool() && (config_.memory_room || config_.device_memory_room);
  if (!config_.memory_ok && !elastic) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_memory_check_ < std::chrono::milliseconds(config_.memory_check_ms)) return;
  last_memory_check_ = now;
  try {
    if (elastic) {
      bool back = true;
      // Host RAM, then each device with memory of its own.
      if (config_.memory_room)
        if (const int64_t room = config_.memory_room(); room < 0) {
          shrink_pool("host", static_cast<uint64_t>(-room));
          back = false;
        }
      if (config_.device_memory_room)
        for (const KvDeviceBytes& d : kv_->storage().pool_bytes_by_device())
          if (d.own_memory)
            if (const int64_t room = config_.device_memory_room(d.device); room < 0) {
              shrink_pool(d.device, static_cast<uint64_t>(-room));
              back = false;
            }
      if (back) kv_->elastic_pool()->memory_back();
    }
    if (config_.memory_ok) {
      const bool paused = !config_.memory_ok();
      if (paused && !scheduler_->admission_paused()) ++stats_.admission_pauses;
      scheduler_->set_admission_paused(paused);
    }
  } catch (const std::exception& e) {
    // An unreadable probe (a bad PAGELLM_MEMINFO file) skips the check; it
    // fails no request.
    if (!memory_check_failed_)
      std::fprintf(stderr, "pagellm: warning: memory check failed: %s (skipped until it reads)\n",
                   e.what());
    memory_check_failed_ = true;
    return;
  }
  memory_check_failed_ = false;
}

bool Engine::watches_memory() const {
  const ElasticPool* ep = kv_->elastic_pool();
  return ep && (config_.memory_room || config_.device_memory_room) && ep->top_chunk() > 0;
}

KvDeviceBytes Engine::pool_bytes_in(const std::string& memory) const {
  KvDeviceBytes sum{memory};
  for (const KvDeviceBytes& d : kv_->storage().pool_bytes_by_device())
    if (d.own_memory ? d.device == memory : memory == "host") {
      sum.resident += d.resident;
      sum.planned += d.planned;
    }
  return sum;
}

void Engine::shrink_pool(const std::string& memory, uint64_t bytes) {
  ElasticPool& ep = *kv_->elastic_pool();
  const size_t held_before = pool_bytes_in(memory).resident;
  uint64_t freed = 0;  // of `memory`'s pools (a chunk spans every device)
  int32_t chunks = 0;
  size_t preempted = 0;
  while (freed < bytes && ep.top_chunk() > 0) {
    const int32_t c = ep.top_chunk();
    const int32_t begin = ep.chunk_begin(c), end = ep.chunk_end(c);
    // The chunk's cached blocks go with it; the sequences holding blocks
    // there are preempted, newest first (running() is in admission order).
    const std::vector<Sequence*> running = scheduler_->running();
    for (auto it = running.rbegin(); it != running.rend(); ++it) {
      Sequence* s = *it;
      const auto& blocks = s->blocks.blocks();
      if (std::none_of(blocks.begin(), blocks.end(),
                       [&](int32_t b) { return b >= begin && b < end; }))
        continue;
      scheduler_->preempt_now(s);
      kv_->release_state_slot(s->state_slot);  // computed again from zeros
      ++preempted;
    }
    // Its cached blocks go to the disk tier (written unless on disk already),
    // never to the host tier: memory is what is short.
    std::function<void(int32_t, std::span<const int32_t>)> to_disk;
    if (disk_tier_)
      to_disk = [this](int32_t id, std::span<const int32_t> tokens) { disk_tier_->evicted(id, tokens); };
    if (!ep.release_top(to_disk)) break;  // a block is still held: keep the rest
    freed = held_before - pool_bytes_in(memory).resident;
    ++chunks;
  }
  if (chunks == 0) return;
  const KvDeviceBytes now = pool_bytes_in(memory);
  std::fprintf(stderr,
               "pagellm: KV pool: %s memory is short by %s: gave back %s (%d chunks, %zu "
               "sequences preempted); its pools hold %s of %s\n",
               memory.c_str(), format_size(bytes).c_str(), format_size(freed).c_str(), chunks,
               preempted, format_size(now.resident).c_str(), format_size(now.planned).c_str());
}

}  // namespace pagellm
