// Which backend ops a model's layers need, checked when layers are placed on
// a device: a placement the device cannot run is refused before anything is
// copied there, with the op it lacks.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "kvcache/kv_cache_storage.h"
#include "model/hparams.h"

namespace pagellm {

// ConfigError when `b` lacks an op that layers [p.layer_begin, p.layer_end)
// of the model need (`ropes`: the model's RoPE tables with their factors).
void check_backend_supports(const Backend& b, const KvPoolPlacement& p, const ModelHParams& hp,
                            const std::vector<RopeParams>& ropes);

}  // namespace pagellm
