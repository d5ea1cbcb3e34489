// Shared by the hybrid engine tests: make-model's small qwen35 / qwen35moe
// files (n_layer layers, every 4th full attention with a gated output, the
// others gated delta-net; default 4: 0-2 delta-net, 3 attention), written
// once per run and layer count.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "model/make_model.h"
#include "support/test_support.h"
#include "util/thread_pool.h"

namespace pagellm::test {

inline std::string hybrid_model(const std::string& arch, int32_t n_layer = 4) {
  static std::map<std::pair<std::string, int32_t>, std::unique_ptr<TempPath>> made;
  auto& path = made[{arch, n_layer}];
  if (!path) {
    path = std::make_unique<TempPath>(".gguf");
    MakeModelSpec spec;
    spec.arch = arch;
    spec.n_embd = 128;
    spec.n_layer = n_layer;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 128;
    if (arch == "qwen35moe") {
      spec.n_expert = 4;
      spec.n_expert_used = 2;
    }
    spec.type = DType::Q8_0;
    spec.vocab_from = data_path("stories260K.gguf");
    ThreadPool pool(2);
    make_model(spec, path->path, pool);
  }
  return path->path;
}

}  // namespace pagellm::test
