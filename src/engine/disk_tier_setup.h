// The prefix cache's disk tier for an engine (kvcache/disk_tier.h): its
// identity (the model file's content digest, the KV type, block size and the
// pools' layout) and the tier over the runtime's storage. Models whose
// prefix cache cannot use it go without, with a note on stderr.
#pragma once

#include <memory>

#include "engine/kv_runtime.h"
#include "kvcache/disk_tier.h"

namespace pagellm {

// Null (after a note) for models with recurrent layers (a prefix would need
// its state checkpoint too), with window groups, for a pipeline stage that
// holds only some layers, or without a prefix cache.
// Throws ConfigError / SystemError when the directory or the model file
// cannot be used.
std::unique_ptr<DiskTier> make_disk_tier(const DiskTierOptions& options, const ModelRunner& model,
                                         KvRuntime& kv);

}  // namespace pagellm
