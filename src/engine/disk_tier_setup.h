// The prefix cache's tiers beyond the pool for an engine: the disk tier
// (kvcache/disk_tier.h) with its identity (the model file's content digest,
// the KV type, block size and the pools' layout) and the host tier
// (kvcache/host_tier.h) before it. Models whose prefix cache cannot use them
// go without, with a note on stderr. The engine hands the chain's head to
// KvCacheManager::set_prefix_tier.
#pragma once

#include <memory>

#include "engine/kv_runtime.h"
#include "kvcache/disk_tier.h"
#include "kvcache/host_tier.h"

namespace pagellm {

// Null (after a note) for models with recurrent layers (a prefix would need
// its state checkpoint too), with window groups, for a pipeline stage that
// holds only some layers, or without a prefix cache.
// Throws ConfigError / SystemError when the directory or the model file
// cannot be used.
std::unique_ptr<DiskTier> make_disk_tier(const DiskTierOptions& options, const ModelRunner& model,
                                         KvRuntime& kv);

// Null (after a note) where make_disk_tier is, or when max_bytes holds no
// block. `next` (may be null) gets the blocks it drops and is asked after it;
// blocks keep the disk tier's keys. Throws SystemError when the memory
// cannot be reserved.
std::unique_ptr<HostTier> make_host_tier(const HostTierOptions& options, const ModelRunner& model,
                                         KvRuntime& kv, DiskTier* next);

}  // namespace pagellm
