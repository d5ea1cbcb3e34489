// Shared by the hybrid engine tests: make-model's small qwen35 / qwen35moe
// files (4 layers: 0-2 gated delta-net, 3 full attention with a gated
// output), written once per run.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "model/make_model.h"
#include "support/test_support.h"
#include "util/thread_pool.h"

namespace pagellm::test {

inline std::string hybrid_model(const std::string& arch) {
  static std::map<std::string, std::unique_ptr<TempPath>> made;
  auto& path = made[arch];
  if (!path) {
    path = std::make_unique<TempPath>(".gguf");
    MakeModelSpec spec;
    spec.arch = arch;
    spec.n_embd = 128;
    spec.n_layer = 4;  // 0-2 gated delta-net, 3 full attention
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
