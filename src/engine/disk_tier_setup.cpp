#include "engine/disk_tier_setup.h"

#include <cstdio>

#include "kvcache/block_copy.h"
#include "util/sizes.h"

namespace pagellm {

namespace {

// Why the prefix cache's blocks cannot leave the pool (null: they can). The
// same reasons for every tier, in the same words.
const char* no_tier_reason(const ModelRunner& model, KvRuntime& kv) {
  if (const char* why = model.hparams().no_prefix_tier_reason()) return why;
  if (kv.storage().placements().empty() || kv.storage().placements().front().layer_begin != 0 ||
      kv.storage().placements().back().layer_end != model.hparams().n_layer)
    return "in a pipeline, other ranks hold the later layers' KV";
  if (!kv.manager().prefix_caching()) return "the prefix cache is off";
  return nullptr;
}

}  // namespace

std::unique_ptr<DiskTier> make_disk_tier(const DiskTierOptions& options, const ModelRunner& model,
                                         KvRuntime& kv) {
  if (const char* why = no_tier_reason(model, kv)) {
    std::fprintf(stderr, "pagellm: note: --cache-dir is not used: %s\n", why);
    return nullptr;
  }
  BlockFileIdentity id;
  id.model = model_file_digest(model.file().path(), options.dir.empty() ? "." : options.dir);
  id.kv_type = kv.config().kv_type;
  id.block_size = kv.config().block_size;
  id.layout = storage_layout_digest(kv.storage());
  return std::make_unique<DiskTier>(options, id, kv.storage(),
                                    kv.manager().allocator().num_blocks());
}

std::unique_ptr<HostTier> make_host_tier(const HostTierOptions& options, const ModelRunner& model,
                                         KvRuntime& kv, DiskTier* next) {
  if (const char* why = no_tier_reason(model, kv)) {
    std::fprintf(stderr, "pagellm: note: --cache-host is not used: %s\n", why);
    return nullptr;
  }
  const size_t block = storage_block_bytes(kv.storage());
  if (block == 0 || options.max_bytes < block) {
    std::fprintf(stderr, "pagellm: note: --cache-host is not used: %s holds no KV block (%s)\n",
                 format_size(options.max_bytes).c_str(), format_size(block).c_str());
    return nullptr;
  }
  // Without a disk tier the keys never leave the process: no model digest.
  BlockFileIdentity id;
  if (next) {
    id = next->identity();
  } else {
    id.kv_type = kv.config().kv_type;
    id.block_size = kv.config().block_size;
  }
  return std::make_unique<HostTier>(options, id, kv.storage(),
                                    kv.manager().allocator().num_blocks(),
                                    kv.config().block_size, next);
}

}  // namespace pagellm
