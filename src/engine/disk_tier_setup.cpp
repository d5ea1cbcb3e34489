#include "engine/disk_tier_setup.h"

#include <cstdio>

namespace pagellm {

std::unique_ptr<DiskTier> make_disk_tier(const DiskTierOptions& options, const ModelRunner& model,
                                         KvRuntime& kv) {
  const char* why = nullptr;
  if (model.hparams().has_recurrent())
    why = "models with recurrent layers would need their state checkpoints on disk too";
  else if (kv.manager().n_groups() > 1)
    why = "sliding-window layers keep no whole prefix";
  else if (kv.storage().placements().empty() ||
           kv.storage().placements().front().layer_begin != 0 ||
           kv.storage().placements().back().layer_end != model.hparams().n_layer)
    why = "in a pipeline, other ranks hold the later layers' KV";
  else if (!kv.manager().prefix_caching())
    why = "the prefix cache is off";
  if (why) {
    std::fprintf(stderr, "pagellm: note: --cache-dir is not used: %s\n", why);
    return nullptr;
  }
  BlockFileIdentity id;
  id.model = model_file_digest(model.file().path(), options.dir.empty() ? "." : options.dir);
  id.kv_type = kv.config().kv_type;
  id.block_size = kv.config().block_size;
  id.layout = storage_layout_digest(kv.storage());
  auto tier = std::make_unique<DiskTier>(options, id, kv.storage(),
                                         kv.manager().allocator().num_blocks());
  kv.manager().set_prefix_tier(tier.get());
  return tier;
}

}  // namespace pagellm
