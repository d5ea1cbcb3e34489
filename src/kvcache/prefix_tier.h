// A home for the prefix cache's full blocks beyond the KV pool: one chain of
// tiers, nearest first (the host tier, kvcache/host_tier.h, then the disk
// tier, kvcache/disk_tier.h). KvCacheManager tells the chain's head each
// block that commit() hashes and each hashed block the pool evicts, and when
// a prompt's in-memory match ends, asks it for the prompt's next blocks.
// Blocks are named by their id in group 0 and their parent's id: a tier
// keeps each committed block's chained key (kvcache/block_file.h).
// Called on the engine thread only; never throws. Only the copies that
// copy_ahead() starts, and the restore copies that place() returns, run on a
// worker, during the forward pass.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "kvcache/block_file.h"

namespace pagellm {

class PrefixTier {
 public:
  virtual ~PrefixTier() = default;
  // Block `block` now holds the full block `tokens`, which follows block
  // `parent` (-1: the sequence's first block) in a sequence.
  virtual void committed(int32_t block, int32_t parent, std::span<const int32_t> tokens) = 0;
  // Looks up the full block `tokens` after block `parent` (-1: first); true:
  // its K/V is ready for place().
  virtual bool fetch(int32_t parent, std::span<const int32_t> tokens) = 0;
  // A block's bytes going into the pool: runs on any thread, while nothing
  // else reads or writes the block (kvcache/kv_cache_manager.h).
  using RestoreCopy = std::function<void()>;
  // Puts what fetch() found into block `block` of every layer: the tier's
  // bookkeeping now, the bytes now (empty result: a device's pool, whose
  // copies go on its stream) or by the returned copy, which runs before
  // anything reads the block and before restores_done().
  virtual RestoreCopy place(int32_t block) = 0;
  // The copies place() returned have run: their sources may be reused.
  virtual void restores_done() {}
  // Block `block` was restored from the tier above with the bytes `payload`
  // (its copy into the pool may still be under way), after block `parent`:
  // this tier learns its key, and may keep the bytes.
  virtual void restored(int32_t /*block*/, int32_t /*parent*/, std::span<const int32_t> /*tokens*/,
                        std::span<const uint8_t> /*payload*/) {}
  // The pool is about to reuse block `block`, a cached full block holding
  // `tokens` whose bytes are still there: a tier may keep a copy.
  virtual void evicted(int32_t /*block*/, std::span<const int32_t> /*tokens*/) {}
  // The pool will evict `blocks` (cached full blocks holding `tokens[i]`)
  // next: a tier may start copying them now, off the engine thread, so that
  // evicted() finds them kept. Their bytes stay as they are until
  // copy_ahead_wait(), which the engine calls after the forward pass and
  // before anything allocates again (a cached block is never written).
  virtual void copy_ahead(std::span<const int32_t> /*blocks*/,
                          std::span<const std::span<const int32_t>> /*tokens*/) {}
  virtual void copy_ahead_wait() {}
  // The tier above drops a block (`payload`: its bytes, kvcache/block_copy.h):
  // this one may keep it.
  virtual void demoted(const BlockFileHeader& /*header*/, std::span<const uint8_t> /*payload*/) {}
  // A queued request's prompt continues with the full blocks `tokens` after
  // block `parent` (-1: first), of which the tiers above hold the first
  // `held`: a tier that reads slowly (the disk) may start reading the rest
  // for `owner` (kvcache/block_prefetch.h).
  virtual void prefetch(uint64_t /*owner*/, int32_t /*parent*/, std::span<const int32_t> /*tokens*/,
                        size_t /*held*/) {}
  // `owner` is admitted or gone: what was read ahead for it can go.
  virtual void forget_prefetch(uint64_t /*owner*/) {}
  // The engine's prompt steps computed `tokens` in `seconds` (the
  // restore-or-recompute rule, kvcache/host_tier.h's RestoreCost).
  virtual void prefilled(double /*tokens*/, double /*seconds*/) {}
};

}  // namespace pagellm
